"""OcrService's page accounting: every selected page exactly once, in order, even when the pipeline
misbehaves (skips, duplicates, fails mid-way, runs past the deadline)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.ingest import UploadSink
from gateway.service import OcrRequest, OcrService
from inkstream.errors import InvalidInput, ResourceExhausted, Unavailable
from tests.gateway_api.conftest import FakePipeline, expected_text, marked_pdf

pytestmark = pytest.mark.timeout(60)


class Misbehaving(FakePipeline):
    """FakePipeline whose output stream is edited by ``mode``."""

    def __init__(self, mode: str):
        super().__init__()
        self.mode = mode

    async def run(self, pages, options):
        n = 0
        async for out in super().run(pages, options):
            n += 1
            if self.mode == "skip" and out.index == 1:
                continue
            if self.mode == "duplicate":
                yield out
            if self.mode == "fail" and n == 3:
                raise Unavailable("every decoder replica is gone")
            if self.mode == "hang" and n == 2:
                await asyncio.sleep(3600)
            yield out


async def _pages(tmp_path, pipeline, numbers, deadline_s=None, **req):
    sink = UploadSink(tmp_path, 1 << 30)
    sink.write(marked_pdf(numbers))
    from gateway.config import GatewayConfig

    svc = OcrService(GatewayConfig(), pipeline)
    async with await svc.prepare(sink.finish(), OcrRequest(**req)) as prepared:
        return [p async for p in prepared.pages(deadline_s)]


async def test_skipped_page_becomes_internal_error(tmp_path):
    pages = await _pages(tmp_path, Misbehaving("skip"), [1, 2, 3])
    assert [p.index for p in pages] == [1, 2, 3]
    assert pages[1].status == "error" and pages[1].error.code == "INTERNAL"
    assert pages[2].text == expected_text(3)


async def test_duplicates_are_dropped(tmp_path):
    pages = await _pages(tmp_path, Misbehaving("duplicate"), [4, 5])
    assert [p.index for p in pages] == [1, 2] and [p.text for p in pages] == [expected_text(4), expected_text(5)]


async def test_failure_after_first_page_marks_the_rest(tmp_path):
    pages = await _pages(tmp_path, Misbehaving("fail"), [1, 2, 3, 4])
    assert [p.status for p in pages] == ["ok", "ok", "error", "error"]
    assert {p.error.code for p in pages[2:]} == {"UNAVAILABLE"}


async def test_failure_before_first_page_raises(tmp_path):
    fake = FakePipeline()
    fake.raise_on_run = Unavailable("no encoder")
    with pytest.raises(Unavailable):
        await _pages(tmp_path, fake, [1, 2])


async def test_deadline_turns_remaining_pages_into_errors(tmp_path):
    pages = await _pages(tmp_path, Misbehaving("hang"), [1, 2, 3], deadline_s=1.0)
    assert [p.status for p in pages] == ["ok", "error", "error"]
    assert pages[1].error.code == "DEADLINE_EXCEEDED"


async def test_options_reach_the_pipeline(tmp_path):
    fake = FakePipeline()
    await _pages(tmp_path, fake, [1], mode="small", task="markdown")
    assert fake.options_seen[0].mode == "small" and fake.options_seen[0].task == "markdown"
    with pytest.raises(InvalidInput, match="invalid task"):
        await _pages(tmp_path, fake, [1], task="<script>")
    fake.tasks = ("ocr", "markdown")
    with pytest.raises(InvalidInput, match="supports: ocr, markdown"):
        await _pages(tmp_path, fake, [1], task="translate")


async def test_request_scope_waits_for_admission_and_releases_everything(tmp_path):
    from gateway.config import GatewayConfig
    from gateway.scope import RequestScope

    fake = FakePipeline(capacity=0)  # the gateway is full
    svc = OcrService(GatewayConfig(), fake)
    with pytest.raises(ResourceExhausted):
        await RequestScope(svc, "r0").admit()
    sink = UploadSink(tmp_path, 1 << 30)
    sink.write(marked_pdf([5]))
    upload = sink.finish()
    async with RequestScope(svc, "r1") as scope:
        waiting = asyncio.ensure_future(scope.admit(wait=True))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        fake.capacity = 1  # a slot frees up
        await waiting
        assert fake.admitted == 1
        prepared = await scope.prepare(upload, OcrRequest(format="text"))
        with pytest.raises(RuntimeError, match="opens its document once"):
            await scope.prepare(upload, OcrRequest(format="text"))
        assert [p.text async for p in scope.pages(30.0)] == [expected_text(5)]
    assert fake.admitted == 0 and prepared._closed
