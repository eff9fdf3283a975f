"""Gateway requests that came back wrong from a running stack (``inkstream serve`` processes).

- ``task=hack`` on ``POST /v1/ocr`` and ``/v1/jobs``: 200 with every page an INVALID_ARGUMENT page
  error (the real :class:`gateway.routing.pipeline.Pipeline` had no ``decoder_tasks()``, so the up-front check
  in ``OcrService.check_task`` never ran). Should be 400 naming the model's tasks, before any work.
- every decoder replica stopped: ``POST /v1/ocr`` waited ``replica_wait_s`` per window of pages
  (52 s for 40 pages) and returned 200 with every page UNAVAILABLE, although ``/readyz`` already said
  503. Should be 503 + Retry-After at once.
- an upload slower than ``limits.upload_timeout_s``: 504 Gateway Timeout, a 5xx for the client's
  own slowness. Should be 408 Request Timeout.
"""

from __future__ import annotations

import asyncio

import pytest

from gateway.config import GatewayConfig
from gateway.ingest import UploadSink, upload_too_slow
from gateway.routing.config import PipelineConfig, RetryPolicy
from gateway.routing.pipeline import Pipeline
from gateway.service import OcrRequest, OcrService
from inkstream.errors import InvalidInput, Unavailable, http_status, retry_after_header
from tests.gateway_api.conftest import FakePipeline, marked_pdf
from tests.gateway_pipeline.fakes import FakeDecoder, FakeEncoder, start_server

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def real_pipeline():
    """The real Pipeline against one fake encoder and one fake decoder (tasks: ["ocr"]) on loopback."""
    servers, addrs = [], {}
    for kind, servicer in (("encoder", FakeEncoder(0.0)), ("decoder", FakeDecoder(0.0))):
        srv, addr = await start_server(servicer, kind)
        servers.append(srv)
        addrs[kind] = addr
    p = await Pipeline.connect([addrs["encoder"]], [addrs["decoder"]],
                               PipelineConfig(retry=RetryPolicy(base_s=0.01, cap_s=0.05, replica_wait_s=1.0)))
    await p.wait_ready(5)
    yield p, servers
    await p.close()
    for s in servers:
        await s.stop(0)


async def test_real_pipeline_reports_decoder_tasks(real_pipeline):
    pipeline, _ = real_pipeline
    assert await pipeline.decoder_tasks() == ("ocr",)


async def test_unknown_task_is_refused_up_front_with_real_pipeline(real_pipeline, tmp_path):
    pipeline, _ = real_pipeline
    svc = OcrService(GatewayConfig(), pipeline)
    sink = UploadSink(tmp_path, 1 << 20)
    sink.write(marked_pdf([1]))
    with pytest.raises(InvalidInput, match="unknown task 'hack'.*ocr") as info:
        await svc.prepare(sink.finish(), OcrRequest(task="hack"))
    assert http_status(info.value) == 400


async def test_decoder_tasks_without_any_decoder_is_empty_not_an_error(real_pipeline):
    pipeline, servers = real_pipeline
    await servers[1].stop(0)  # the decoder
    for _ in range(100):
        if not pipeline.decoders.eligible():
            break
        await asyncio.sleep(0.05)
    pipeline._tasks = ()  # as at start-up, before any decoder answered
    assert await pipeline.decoder_tasks() == ()


async def test_document_refused_with_503_when_no_replica_is_serving(tmp_path):
    fake = FakePipeline()
    fake.healthy = False
    svc = OcrService(GatewayConfig(), fake)
    sink = UploadSink(tmp_path, 1 << 20)
    sink.write(marked_pdf([1, 2]))
    with pytest.raises(Unavailable, match="no SERVING decoder replica") as info:
        await svc.prepare(sink.finish(), OcrRequest())
    assert http_status(info.value) == 503
    assert int(retry_after_header(info.value)["Retry-After"]) >= 1
    assert fake.pages_run == 0 and fake.admitted == 0


def test_slow_upload_is_408_not_a_5xx():
    err = upload_too_slow(5.0)
    assert http_status(err) == 408
    assert err.code_name == "DEADLINE_EXCEEDED"  # gRPC keeps its code
