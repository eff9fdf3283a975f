"""The gateway's gRPC API at its page bound (real admission, :mod:`gateway.routing.admission`, over fake
encoder / decoder replicas on loopback): RESOURCE_EXHAUSTED with a retry hint a client of any language
reads from the status (``google.rpc.RetryInfo`` in ``grpc-status-details-bin``), as REST's 429 has
Retry-After."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from client.gateway_client import AsyncGatewayClient
from gateway.apis.grpc_api import build_grpc_server
from gateway.config import GatewayConfig
from gateway.core import GatewayCore
from gateway.routing.config import PipelineConfig
from gateway.routing.pipeline import Pipeline
from inkstream.errors import ResourceExhausted
from inkstream.pb import gateway_pb2, gateway_pb2_grpc
from tests.gateway_api.conftest import marked_pdf

from .fakes import FakeDecoder, FakeEncoder, start_server

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def full_gateway(tmp_path):
    """(gRPC target, pipeline) of a gateway whose one page slot is taken for the whole test."""
    servers = []
    enc, enc_addr = await start_server(FakeEncoder(0.01), "encoder")
    dec, dec_addr = await start_server(FakeDecoder(0.01), "decoder")
    servers += [enc, dec]
    pipeline = await Pipeline.connect([enc_addr], [dec_addr], PipelineConfig(max_pages_in_flight=1))
    await pipeline.wait_ready(5)
    cfg = GatewayConfig()
    cfg.stores.data_dir = str(tmp_path / "data")
    core = GatewayCore(cfg, pipeline)
    core.start()
    server, port, _ = await build_grpc_server(core, 0)
    try:
        async with pipeline.admit("holder"):  # another request holds the gateway's only page slot
            yield f"127.0.0.1:{port}", pipeline
    finally:
        await server.stop(None)
        await core.close()
        await pipeline.close()
        for s in servers:
            await s.stop(0)


def _requests(document: bytes):
    yield gateway_pb2.RecognizeRequest(options=gateway_pb2.OcrOptions(format="text"))
    yield gateway_pb2.RecognizeRequest(chunk=document)


async def test_recognize_at_the_page_bound_is_resource_exhausted_with_retry_info(full_gateway):
    target, _ = full_gateway
    async with grpc.aio.insecure_channel(target) as channel:  # a plain gRPC client, not inkstream's
        call = gateway_pb2_grpc.OcrGatewayStub(channel).Recognize(_requests(marked_pdf([1])), timeout=20)
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            async for _ in call:
                pass
    err = ei.value
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err
    assert "bound of 1 pages in flight" in (err.details() or ""), err.details()
    status = rpc_status.from_call(err)
    assert status is not None, err.trailing_metadata()
    infos = [d for d in status.details if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
    assert len(infos) == 1, status
    info = error_details_pb2.RetryInfo()
    infos[0].Unpack(info)
    assert info.retry_delay.seconds + info.retry_delay.nanos / 1e9 >= 1.0, info
    async with AsyncGatewayClient(target, timeout_s=20) as c:  # inkstream's client turns it into the hint
        with pytest.raises(ResourceExhausted) as ce:
            await c.recognize(marked_pdf([1]))
    assert (ce.value.retry_after_s or 0) >= 1.0
