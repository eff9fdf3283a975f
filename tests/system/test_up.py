"""``inkstream up``: one command starts gateway + encoder + decoder, serves OCR, and SIGTERM stops all."""

from __future__ import annotations

import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from bench.pdfgen import line_pages
from launcher.local_stack import free_port

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(240)]


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``inkstream up`` (started in a session of its own) with its whole process group, and
    reap it; its encoders, decoders and gateway die with it (``PR_SET_PDEATHSIG``)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def children(pid: int) -> list[int]:
    """Pids of the processes whose parent is ``pid`` (from /proc)."""
    out = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_killing_up_outright_takes_its_services_with_it(tiny_ds_checkpoint, tmp_path):
    """An ``inkstream up`` killed with SIGKILL (no drain, no clean-up of its own) leaves no encoder,
    decoder or gateway running: before, they outlived it (one was found 70 minutes later)."""
    out = tmp_path / "up.out"
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "inkstream.cli", "up", "--model", str(tiny_ds_checkpoint),
                                 "--port", "0", "--grpc-port", "0", "--state-dir", str(tmp_path / "state")],
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    kids: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while "inkstream is up" not in out.read_text():
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        kids = children(proc.pid)
        assert len(kids) == 3, kids  # encoder, decoder, gateway
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 5
        while left := [k for k in kids if alive(k)]:
            assert time.monotonic() < deadline, f"services outlived inkstream up by 5 s: {left}"
            time.sleep(0.1)
    finally:
        kill_group(proc)
        for k in kids:  # only if the test failed: the services it started, by pid
            if alive(k):
                os.kill(k, signal.SIGKILL)


def _refused(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) != 0


def test_up_serves_and_stops_cleanly(tiny_ds_checkpoint, shared_dir, tmp_path):
    port, gport = free_port(), free_port()
    out = tmp_path / "up.out"
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "inkstream.cli", "up", "--model", str(tiny_ds_checkpoint),
                                 "--port", str(port), "--grpc-port", str(gport), "--log-dir", str(tmp_path / "logs"),
                                 "--state-dir", str(tmp_path / "state")],
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "inkstream is up" not in out.read_text():
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        line = next(ln for ln in out.read_text().splitlines() if "inkstream is up" in ln)
        assert f"http://127.0.0.1:{port}" in line and f"gRPC 127.0.0.1:{gport}" in line
        replicas = re.findall(r"127\.0\.0\.1:\d+", line.split("encoders", 1)[1])
        assert len(replicas) == 2  # one encoder, one decoder
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
        page = line_pages(shared_dir)[0]
        r = httpx.post(f"http://127.0.0.1:{port}/v1/ocr", files={"file": ("p.png", page, "image/png")},
                       data={"format": "json"}, timeout=120)
        assert r.status_code == 200, r.text[:1000]
        assert [p["status"] for p in r.json()["pages"]] == ["ok"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0, out.read_text()
        for addr in [f"127.0.0.1:{port}", f"127.0.0.1:{gport}", *replicas]:
            assert _refused(addr), f"{addr} still accepts connections after inkstream up stopped"
    finally:
        kill_group(proc)


def test_failed_up_keeps_its_logs(tmp_path):
    """A stack that cannot start says where its logs are, and they are still there after exit (a
    checkpoint of no known family: its services exit; a missing --model folder is refused before,
    exit 2, tests/gateway_pipeline/test_up_state.py).
    """
    import shutil

    model = tmp_path / "no-such-family"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "no_such_family"}')
    proc = subprocess.run([sys.executable, "-m", "inkstream.cli", "up", "--model", str(model),
                           "--state-dir", str(tmp_path / "state"), "--port", "0", "--grpc-port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    logs = re.search(r"logs in (\S+?)\)", proc.stderr)
    assert logs, proc.stderr
    try:
        assert pathlib.Path(logs.group(1)).is_dir(), proc.stderr
    finally:
        shutil.rmtree(logs.group(1), ignore_errors=True)


def _hold(port: int, held: dict[int, socket.socket]) -> socket.socket | None:
    """A socket listening on 127.0.0.1:``port`` unless the session already holds it (tests/conftest.py)
    or another process does (then it is taken anyway); None in those cases."""
    if port in held:
        return None
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        s.listen()
    except OSError:
        s.close()
        return None
    return s


def test_up_picks_free_ports_when_the_defaults_are_taken(tiny_ds_checkpoint, tmp_path, default_ports_held):
    """8080 and 50050 taken: ``inkstream up`` without --port / --grpc-port says so, serves on other
    ports, and prints every service's metrics URL."""
    own = [s for s in (_hold(8080, default_ports_held), _hold(50050, default_ports_held)) if s is not None]
    try:
        _up_on_other_ports(tiny_ds_checkpoint, tmp_path)
    finally:
        for s in own:
            s.close()


def _up_on_other_ports(tiny_ds_checkpoint: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "up.out"
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "inkstream.cli", "up", "--model", str(tiny_ds_checkpoint),
                                 "--log-dir", str(tmp_path / "logs"), "--state-dir", str(tmp_path / "state")],
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "  metrics: gateway: " not in out.read_text():
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        text = out.read_text()
        assert "the default port 8080 is in use" in text and "the default port 50050 is in use" in text, text
        line = next(ln for ln in text.splitlines() if "inkstream is up" in ln)
        m = re.search(r"inkstream is up: (http://127\.0\.0\.1:(\d+))\s+\(gRPC 127\.0\.0\.1:(\d+)", line)
        assert m, line
        url, port, gport = m.group(1), int(m.group(2)), int(m.group(3))
        assert port != 8080 and gport != 50050 and port != gport, line
        assert httpx.get(f"{url}/readyz", timeout=10).status_code == 200
        metrics = dict(re.findall(r"^  metrics: (\w+ \d+|gateway): (\S+)$", text, re.M))
        assert set(metrics) == {"encoder 0", "decoder 0", "gateway"}, text
        assert metrics["gateway"] == f"{url}/metrics"
        for name, murl in metrics.items():
            r = httpx.get(murl, timeout=10)
            assert r.status_code == 200 and "inkstream_" in r.text, (name, murl, r.status_code)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0, out.read_text()
    finally:
        kill_group(proc)


def _up(model: pathlib.Path, state: pathlib.Path, port: int, out: pathlib.Path) -> subprocess.Popen:
    """``inkstream up`` with its state in ``state`` on REST ``port``, running once it said so."""
    with open(out, "a") as f:
        proc = subprocess.Popen([sys.executable, "-m", "inkstream.cli", "up", "--model", str(model), "--port",
                                 str(port), "--grpc-port", "0", "--state-dir", str(state)],
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 180
    while out.read_text().count("inkstream is up") < 1 + out.read_text().count("inkstream up: stopping"):
        assert proc.poll() is None, out.read_text()
        assert time.monotonic() < deadline, out.read_text()
        time.sleep(0.2)
    return proc


def test_jobs_results_and_logs_survive_a_restart(tiny_ds_checkpoint, shared_dir, tmp_path):
    """up, submit a job, Ctrl-C (SIGINT), up again on the same state folder: the job's status and
    result are still there, and the logs of both runs are kept.
    """
    state, out, port = tmp_path / "state", tmp_path / "up.out", free_port()
    out.write_text("")
    url = f"http://127.0.0.1:{port}"
    proc = _up(tiny_ds_checkpoint, state, port, out)
    try:
        r = httpx.post(f"{url}/v1/jobs", files={"file": ("p.png", line_pages(shared_dir)[0], "image/png")},
                       data={"format": "json"}, timeout=60)
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        deadline = time.monotonic() + 120
        while (job := httpx.get(f"{url}/v1/jobs/{job_id}", timeout=10).json())["status"] not in ("done", "failed"):
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
        assert job["status"] == "done", job
        before = httpx.get(f"{url}/v1/jobs/{job_id}/result", timeout=10).json()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=90) == 0, out.read_text()
        assert _refused(f"127.0.0.1:{port}")
        log = state / "logs" / "gateway-0.log"
        first_run_log = log.read_bytes()
        assert first_run_log
        proc = _up(tiny_ds_checkpoint, state, port, out)
        again = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=10)
        assert again.status_code == 200 and again.json()["status"] == "done", again.text
        after = httpx.get(f"{url}/v1/jobs/{job_id}/result", timeout=10)
        assert after.status_code == 200 and after.json()["pages"] == before["pages"]
        assert (state / "gateway" / "jobs.sqlite").is_file()
        assert log.read_bytes().startswith(first_run_log) and log.stat().st_size > len(first_run_log)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=90) == 0, out.read_text()
    finally:
        kill_group(proc)
