"""LocalStack without a model: argument checks and a child that fails to start."""

from __future__ import annotations

import json
import socket

import pytest

from launcher import local_stack, model_dir, up
from launcher.local_stack import LocalStack, free_port
from launcher.model_dir import resolve_model

pytestmark = pytest.mark.timeout(120)


def test_free_port_is_bindable():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_resolve_model(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="no such directory"):
        resolve_model(tmp_path / "missing", tmp_path)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        resolve_model(tmp_path, tmp_path)
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "config.json").write_text("{}")
    assert resolve_model(tmp_path / "ck", tmp_path) == tmp_path / "ck"
    # No --model: the embedded weights when present.
    monkeypatch.setattr(model_dir, "default_model_dir", lambda: tmp_path / "ck")
    assert resolve_model(None, tmp_path) == tmp_path / "ck"


def test_missing_embedded_model_falls_back_with_message(tmp_path, monkeypatch, capsys):
    import models.deepseek_ocr2.tiny as tiny

    written = []

    def fake_write(d, seed=0):
        d.mkdir(parents=True)
        (d / "config.json").write_text("{}")
        written.append(d)
        return d

    monkeypatch.setattr(model_dir, "default_model_dir", lambda: tmp_path / "weights")
    monkeypatch.setattr(tiny, "write_tiny_checkpoint", fake_write)
    got = resolve_model(None, tmp_path)
    assert written == [got]
    err = capsys.readouterr().err
    assert "embedded compact model is missing" in err and "RANDOM" in err and "--model DIR" in err


def test_gateway_url_without_gateway():
    st = LocalStack(gateway=False)
    with pytest.raises(RuntimeError, match="no gateway"):
        _ = st.gateway_url
    st.close()


def test_start_failure_reports_child_log(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "no_such_family"}))
    st = LocalStack(bad, gateway=False, startup_timeout_s=90)
    with pytest.raises(RuntimeError, match=r"exited with code 2(.|\n)*unknown model family"):
        st.start()
    assert not any(any(v) for v in st.alive().values())
    st.close()


def test_up_rejects_bad_counts(capsys):
    with pytest.raises(SystemExit):
        up.main(["--encoders", "0"])
    assert "must be >= 1" in capsys.readouterr().err



def test_replica_that_lost_a_port_race_is_respawned_on_new_ports(tiny_ds_checkpoint, monkeypatch):
    # Another process takes the port free_port() handed out before the child binds it: here a
    # foreign gRPC server that even answers health checks SERVING. The child exits with a bind
    # error; the stack must not mistake the foreign server for its replica, and starts the child
    # again on fresh ports instead of failing.
    from concurrent import futures

    import grpc
    from grpc_health.v1 import health, health_pb2_grpc

    foreign = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), foreign)  # "" is SERVING
    busy = foreign.add_insecure_port("127.0.0.1:0")
    foreign.start()
    try:
        real = local_stack.free_port
        picks = iter([busy])
        monkeypatch.setattr(local_stack, "free_port", lambda host="127.0.0.1": next(picks, None) or real(host))
        with LocalStack(tiny_ds_checkpoint, decoders=0, gateway=False, startup_timeout_s=120) as st:
            assert st.alive()["encoder"] == [True]
            assert st.encoder_addrs != [f"127.0.0.1:{busy}"]
            assert local_stack.grpc_serving(st.encoder_addrs[0])
            assert "bind" in st.log_tail("encoder").lower()  # the first child's failure stays in the log
    finally:
        foreign.stop(None)


def test_grpc_servers_do_not_share_a_port_in_use():
    # gRPC's default SO_REUSEPORT would let a second server bind a port in use and take half its
    # connections; listener_options turns it off, so the bind fails.
    import asyncio

    import grpc

    from inkstream.lifecycle import listener_options

    async def bind_twice() -> tuple[int, int]:
        a, b = grpc.aio.server(options=listener_options()), grpc.aio.server(options=listener_options())
        port = a.add_insecure_port("127.0.0.1:0")
        await a.start()
        try:
            try:
                second = b.add_insecure_port(f"127.0.0.1:{port}")
            except RuntimeError:
                second = 0
            return port, second
        finally:
            await a.stop(None)

    port, second = asyncio.run(bind_twice())
    assert port > 0 and second == 0


def test_kill_all_cuts_a_drain_short():
    import subprocess
    import sys
    import time

    st = LocalStack(gateway=False)
    # A child that ignores SIGTERM, like a gateway still draining a long document.
    child = subprocess.Popen([sys.executable, "-c",
                              "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"])
    st.procs["encoder"].append(child)
    try:
        time.sleep(0.5)
        st.kill_all()
        assert child.wait(timeout=10) == -9
        t0 = time.monotonic()
        st.stop()  # nothing left to wait for
        assert time.monotonic() - t0 < 5
    finally:
        if child.poll() is None:
            child.kill()
        st.close()


def test_up_refuses_a_grpc_port_in_use(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        assert up.main(["--port", "0", "--grpc-port", str(busy)]) == 2
    err = capsys.readouterr().err
    assert f"port {busy} is in use" in err and "--grpc-port" in err


def test_encoders_share_the_machines_cores_for_their_forward_passes(monkeypatch):
    """Each encoder replica's intra-op threads: the cores divided among the encoders, 1 to 4; a value the
    caller puts in env wins; other services get nothing extra; and the encoder's config reads it."""
    from encoder_service.config import load_encoder_config

    key = "INKSTREAM_ENCODER__INTRA_OP_THREADS"
    monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(local_stack.os, "cpu_count", lambda: 6)
    assert LocalStack(encoders=1, gateway=False)._child_env("encoder") == {key: "4"}
    assert LocalStack(encoders=2, gateway=False)._child_env("encoder") == {key: "3"}
    assert LocalStack(encoders=8, gateway=False)._child_env("encoder") == {key: "1"}
    assert LocalStack(encoders=1, gateway=False)._child_env("decoder") == {}
    assert LocalStack(encoders=1, gateway=False, env={key: "1"})._child_env("encoder") == {}
    monkeypatch.setattr(local_stack.os, "cpu_count", lambda: 2)
    env = LocalStack(encoders=1, gateway=False)._child_env("encoder")
    assert env == {key: "2"} and load_encoder_config(environ=env).intra_op_threads == 2
    assert load_encoder_config(environ={}).intra_op_threads is None
