"""System tier: ``inkstream serve encoder`` as a real process on loopback (start, serve, SIGTERM drain)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from inkstream.parent_death import PARENT_PID_ENV
from inkstream.pb import encoder_pb2, encoder_pb2_grpc

pytestmark = [pytest.mark.slow, pytest.mark.system]


def _wait_port(proc: subprocess.Popen, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise AssertionError(f"encoder exited with {proc.returncode}: {proc.stderr.read()}")
        m = re.search(r"listening on [\d.]+:(\d+)", line)
        if m:
            return int(m.group(1))
    raise AssertionError("encoder did not report its port")


def test_serve_encoder_process_serves_and_drains_on_sigterm(tiny_ds_checkpoint, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "INKSTREAM_ENCODER__DRAIN_GRACE_S": "5",
           PARENT_PID_ENV: str(os.getpid())}  # it dies with this test run, however that ends
    proc = subprocess.Popen(
        [sys.executable, "-m", "inkstream.cli", "serve", "encoder", "--model", str(tiny_ds_checkpoint), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        port = _wait_port(proc, 120)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            health = health_pb2_grpc.HealthStub(ch)
            deadline = time.monotonic() + 120
            while health.Check(health_pb2.HealthCheckRequest()).status != health_pb2.HealthCheckResponse.SERVING:
                assert time.monotonic() < deadline, "encoder never became SERVING"
                time.sleep(0.2)
            from tests.encoder.test_deepseek_ocr2 import _page

            stub = encoder_pb2_grpc.VisionEncoderStub(ch)
            resps = list(stub.Encode(iter([encoder_pb2.EncodeRequest(page_index=0, image=_page(3))]), timeout=60))
            assert len(resps) == 1 and not resps[0].HasField("error") and resps[0].n_vision_tokens > 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
