"""System tier: ``inkstream serve decoder`` as a real process on loopback: NOT_SERVING -> SERVING,
one decode over gRPC, then SIGTERM drains and the process exits 0."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import grpc
import pytest
import torch
from grpc_health.v1 import health_pb2, health_pb2_grpc

from inkstream.lifecycle import client_options
from inkstream.parent_death import PARENT_PID_ENV
from inkstream.pb import decoder_pb2, decoder_pb2_grpc
from inkstream.wire import to_wire

pytestmark = [pytest.mark.slow, pytest.mark.system]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_decoder_process_ready_decode_and_drain(tiny_ds_checkpoint, tmp_path):
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", INKSTREAM_DECODER__DRAIN_GRACE_S="5",
               **{PARENT_PID_ENV: str(os.getpid())})  # it dies with this test run, however that ends
    log = open(tmp_path / "decoder.log", "w")  # noqa: SIM115 - the child's output; closed in the finally below
    proc = subprocess.Popen([sys.executable, "-m", "inkstream.cli", "serve", "decoder",
                             "--model", str(tiny_ds_checkpoint), "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=client_options()) as ch:
            health = health_pb2_grpc.HealthStub(ch)
            deadline, status = time.monotonic() + 120, None
            while time.monotonic() < deadline:
                try:
                    status = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=2).status
                except grpc.RpcError:
                    status = None
                if status == health_pb2.HealthCheckResponse.SERVING:
                    break
                assert proc.poll() is None, (tmp_path / "decoder.log").read_text()
                time.sleep(0.2)
            assert status == health_pb2.HealthCheckResponse.SERVING, (tmp_path / "decoder.log").read_text()
            stub = decoder_pb2_grpc.TextDecoderStub(ch)
            info = stub.Info(decoder_pb2.InfoRequest(), timeout=10)
            vt = torch.randn(16, info.hidden_size) * 0.1
            req = decoder_pb2.DecodeRequest(segment_id=3, vision_tokens=to_wire(vt, torch.bfloat16),
                                            sampling=decoder_pb2.SamplingParams(max_new_tokens=8))
            out = list(stub.Decode(iter([req]), timeout=60))
            assert out[-1].segment_id == 3 and out[-1].finish_reason != decoder_pb2.FINISH_REASON_UNSPECIFIED
            assert 0 < out[-1].usage.generated_tokens <= 8
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
