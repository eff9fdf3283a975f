"""A replica that can no longer work says so: NOT_SERVING, then exit with a non-zero status.

Unit tests of the trip wire (:mod:`inkstream.fatal`), and real ``inkstream serve encoder`` /
``serve decoder`` processes whose model half is broken after warm-up (every forward raises, as
with a lost device): health turns NOT_SERVING for the gateway's watch and the process exits with
:data:`inkstream.fatal.EXIT_UNRECOVERABLE`, so ``inkstream up`` or Kubernetes starts a new one.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from inkstream.fatal import EXIT_UNRECOVERABLE, ForwardHealth, is_unrecoverable
from tests.encoder.test_process import _wait_port

# Run in the child: break the model half once the flag file exists (after warm-up), then run the
# service's real main. ``target`` is what raises: the encoder's encode_batch or the decoder's prefill.
_CHILD = r"""
import os, sys
flag, message, service = sys.argv[1], sys.argv[2], sys.argv[3]
def broken(real):
    def call(*a, **kw):
        if os.path.exists(flag):
            raise RuntimeError(message)
        return real(*a, **kw)
    return call
if service == "encoder":
    import encoder_service.server as srv
    real_load = srv.load_half
    def load(cfg):
        half = real_load(cfg)
        half.encode_batch = broken(half.encode_batch)
        return half
    srv.load_half = load
    from encoder_service.main import main
else:
    import decoder_service.running_batch as rb
    rb.prefill = broken(rb.prefill)
    from decoder_service.main import main
sys.exit(main(sys.argv[4:]))
"""


def test_consecutive_failures_trip_once_and_a_success_resets():
    trips = []
    h = ForwardHealth("encoder", trips.append, max_consecutive_failures=3)
    h.failure(ValueError("bad page"))
    h.failure(ValueError("bad page"))
    h.success()  # one good page: the replica still works
    h.failure(ValueError("x"))
    h.failure(ValueError("x"))
    assert trips == []
    h.failure(ValueError("x"))
    h.failure(ValueError("x"))
    assert len(trips) == 1 and "3 encoder forward passes failed in a row" in trips[0]


def test_a_lost_device_trips_at_once():
    trips = []
    h = ForwardHealth("decoder", trips.append, max_consecutive_failures=100)
    err = RuntimeError("CUDA error: an illegal memory access was encountered")
    assert is_unrecoverable(err) and not is_unrecoverable(ValueError("image too large"))
    h.failure(err)
    assert len(trips) == 1 and "device failed" in trips[0]


def _start(service: str, checkpoint: pathlib.Path, flag: pathlib.Path, message: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", f"INKSTREAM_{service.upper()}__MAX_CONSECUTIVE_FAILURES": "3"}
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(flag), message, service, "--model", str(checkpoint), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_status(health, want, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if health.Check(health_pb2.HealthCheckRequest(), timeout=2).status == want:
                return
        except grpc.RpcError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"health never became {want}")


def _requests(service: str, ch: grpc.Channel, n: int) -> None:
    """``n`` calls, each running (and failing) one forward pass; their errors are expected."""
    from inkstream.pb import decoder_pb2, decoder_pb2_grpc, encoder_pb2, encoder_pb2_grpc, tensor_pb2
    from tests.encoder.test_deepseek_ocr2 import _page

    for i in range(n):
        try:
            if service == "encoder":
                list(encoder_pb2_grpc.VisionEncoderStub(ch).Encode(
                    iter([encoder_pb2.EncodeRequest(page_index=i, image=_page(i))]), timeout=30))
            else:
                info = decoder_pb2_grpc.TextDecoderStub(ch).Info(decoder_pb2.InfoRequest(), timeout=10)
                hidden = info.hidden_size
                tokens = tensor_pb2.Tensor(shape=[4, hidden], dtype=tensor_pb2.DTYPE_FLOAT32,
                                           data=b"\x00" * (4 * hidden * 4))
                req = decoder_pb2.DecodeRequest(segment_id=0, vision_tokens=tokens,
                                                sampling=decoder_pb2.SamplingParams(max_new_tokens=4))
                list(decoder_pb2_grpc.TextDecoderStub(ch).Decode(iter([req]), timeout=30))
        except grpc.RpcError:
            return  # the replica stopped: it has tripped


@pytest.mark.slow
@pytest.mark.system
@pytest.mark.timeout(240)
@pytest.mark.parametrize("service,message", [
    ("encoder", "CUDA error: an illegal memory access was encountered"),
    ("decoder", "forward failed: weights corrupted"),
])
def test_a_replica_whose_every_forward_fails_reports_not_serving_and_exits(service, message, tiny_ds_checkpoint,
                                                                           tmp_path):
    flag = tmp_path / "broken"
    proc = _start(service, tiny_ds_checkpoint, flag, message)
    try:
        port = _wait_port(proc, 120)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            health = health_pb2_grpc.HealthStub(ch)
            _wait_status(health, health_pb2.HealthCheckResponse.SERVING, 150)
            watch = health.Watch(health_pb2.HealthCheckRequest(), timeout=60)
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
            flag.write_text("the device is gone")
            _requests(service, ch, 6)
            seen = [r.status for r in watch_until_end(watch)]
            assert health_pb2.HealthCheckResponse.NOT_SERVING in seen  # the gateway's watch is told
        assert proc.wait(timeout=30) == EXIT_UNRECOVERABLE
        assert "stopped:" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def watch_until_end(watch):
    """Health reports until the stream ends (the server stopped)."""
    try:
        yield from watch
    except grpc.RpcError:
        return
