"""Health / readiness / drain of the encoder server, and its Prometheus endpoint."""

from __future__ import annotations

import asyncio
import threading

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from encoder_service.server import SERVICE_NAME
from inkstream.lifecycle import LIVENESS_SERVICE
from inkstream.pb import encoder_pb2
from tests.encoder.doubles import PatchHalf, page_png
from tests.encoder.grpc_util import encode_all, requests, running_encoder

pytestmark = pytest.mark.integration
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


async def _health(channel: grpc.aio.Channel, service: str = SERVICE_NAME) -> int:
    resp = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service))
    return resp.status


async def test_not_serving_until_warm_up_ran(patch_half: PatchHalf):
    patch_half.gate = threading.Event()  # holds the warm-up forward
    async with running_encoder(patch_half, wait_ready=False) as (srv, stub, channel):
        try:
            await asyncio.sleep(0.2)
            assert await _health(channel) == NOT_SERVING
            assert await _health(channel, "") == NOT_SERVING
            assert await _health(channel, LIVENESS_SERVICE) == SERVING  # loading is not a liveness failure
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await encode_all(stub, requests([(0, page_png(0), "")]))
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE and "loading" in err.value.details()
            assert patch_half.batches == []
            patch_half.gate.set()
            await srv.wait_ready(10)
            # the warm-up page ran through the full path, then one forward at max_batch_size (8)
            assert patch_half.batches == [(("pixels", 32), 1), (("pixels", 32), 8)]
            assert await _health(channel) == SERVING
            res = await encode_all(stub, requests([(0, page_png(0), "")]))
            assert not res[0].HasField("error")
        finally:
            patch_half.gate.set()


async def test_drain_turns_not_serving_and_finishes_in_flight_pages(patch_half: PatchHalf):
    async with running_encoder(patch_half, max_batch_size=1, max_wait_ms=0) as (srv, stub, channel):
        assert await _health(channel) == SERVING
        patch_half.gate = threading.Event()
        try:
            in_flight = asyncio.ensure_future(encode_all(stub, requests([(7, page_png(7), "")])))
            while not srv.batcher.inflight:
                await asyncio.sleep(0.01)
            drain = asyncio.ensure_future(srv.drain())
            await asyncio.sleep(0.1)
            assert await _health(channel) == NOT_SERVING
            assert await _health(channel, "") == NOT_SERVING
            assert await _health(channel, LIVENESS_SERVICE) == SERVING  # a draining pod is not restarted
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await encode_all(stub, requests([(0, page_png(0), "")]))
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE and "draining" in err.value.details()
            assert not drain.done()  # waits for the in-flight page
            patch_half.gate.set()
            res = await asyncio.wait_for(in_flight, 10)
            assert not res[7].HasField("error") and res[7].n_vision_tokens == 16
            await asyncio.wait_for(drain, 10)
            assert srv.lifecycle.stopped.is_set()
        finally:
            patch_half.gate.set()


async def test_info_unavailable_while_loading(patch_half: PatchHalf):
    patch_half.gate = threading.Event()
    async with running_encoder(patch_half, wait_ready=False) as (srv, stub, _):
        try:
            await asyncio.sleep(0.1)
            # Info is set right after loading (before warm-up), so it answers during warm-up.
            info = await stub.Info(encoder_pb2.InfoRequest())
            assert info.model_id == "test/patch-tower"
        finally:
            patch_half.gate.set()


async def test_metrics_endpoint_exports_encoder_instruments(patch_half: PatchHalf):
    from encoder_service.config import EncoderConfig
    from encoder_service.server import build_server

    cfg = EncoderConfig(host="127.0.0.1", port=0, metrics_port=0)
    srv = await build_server(cfg, half=patch_half)  # process-wide meter (Prometheus reader)
    await srv.start()
    try:
        await srv.wait_ready(30)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
            from inkstream.pb import encoder_pb2_grpc

            await encode_all(encoder_pb2_grpc.VisionEncoderStub(ch), requests([(0, page_png(0), "")]))
        async with httpx.AsyncClient() as client:
            body = (await client.get(f"http://127.0.0.1:{srv.metrics_port}/metrics")).text
    finally:
        await srv.stop(0)
    for name in ("inkstream_encoder_pages_encoded", "inkstream_encoder_batch_size", "inkstream_encoder_queue_depth",
                 "inkstream_encoder_encode_latency_seconds", "inkstream_encoder_inflight_pages"):
        assert name in body, name
