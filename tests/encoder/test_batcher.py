"""Unit tests of MicroBatcher (no gRPC): batching, grouping, admission, cancellation, isolation, metrics."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from encoder_service.batch_types import BatchLimits
from encoder_service.batcher import MicroBatcher
from encoder_service.metrics import EncoderMetrics
from inkstream.errors import Cancelled, InternalError, InvalidInput, ResourceExhausted, Unavailable
from tests.encoder.doubles import PatchHalf, page_png, solid_png


def _metrics() -> tuple[EncoderMetrics, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    return EncoderMetrics(provider.get_meter("test")), reader


def _points(reader: InMemoryMetricReader) -> dict[str, list]:
    out: dict[str, list] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = list(m.data.data_points)
    return out


async def _started(half: PatchHalf, **kw) -> MicroBatcher:
    limits = BatchLimits(**{"max_batch_size": 4, "max_wait_ms": 20.0, "max_queue_pages": 64, **kw})
    b = MicroBatcher(limits, _metrics()[0])
    await b.start(half)
    return b


async def test_concurrent_pages_are_batched_and_match_unbatched(patch_half: PatchHalf):
    patch_half.delay_s = 0.05  # pages pile up behind the first forward
    b = await _started(patch_half, max_batch_size=4, max_wait_ms=5.0)
    images = [page_png(i) for i in range(10)]
    try:
        results = await asyncio.gather(*(b.submit(im) for im in images))
    finally:
        await b.stop()
    sizes = [n for _, n in patch_half.batches]
    assert sum(sizes) == 10 and max(sizes) > 1, sizes
    assert all(n <= 4 for n in sizes)
    for im, res in zip(images, results, strict=True):
        got = res.page.segments[0].vision_tokens
        assert got.shape == (16, 24) and got.dtype == torch.float32
        torch.testing.assert_close(got, patch_half.reference(im))
        assert res.seconds > 0


async def test_pages_are_grouped_by_batch_key(patch_half: PatchHalf):
    patch_half.delay_s = 0.03
    b = await _started(patch_half, max_batch_size=8, max_wait_ms=10.0)
    modes = ["small", "large"] * 6
    try:
        results = await asyncio.gather(*(b.submit(page_png(i), m) for i, m in enumerate(modes)))
    finally:
        await b.stop()
    # PatchHalf asserts one key per batch; both keys ran, batched.
    keys = {k for k, _ in patch_half.batches}
    assert keys == {("pixels", 32), ("pixels", 64)}
    assert max(n for _, n in patch_half.batches) > 1
    for m, res in zip(modes, results, strict=True):
        assert res.page.n_vision_tokens == (16 if m == "small" else 64)


async def test_lone_page_runs_after_max_wait(patch_half: PatchHalf):
    b = await _started(patch_half, max_batch_size=8, max_wait_ms=30.0)
    try:
        res = await asyncio.wait_for(b.submit(page_png(0)), 5)
    finally:
        await b.stop()
    assert patch_half.batches == [(("pixels", 32), 1)]
    assert res.seconds >= 0.03


async def test_queue_full_is_resource_exhausted_with_retry_hint(patch_half: PatchHalf):
    patch_half.gate = threading.Event()
    b = await _started(patch_half, max_batch_size=1, max_wait_ms=0.0, max_queue_pages=2)
    try:
        first = asyncio.ensure_future(b.submit(page_png(0)))
        while not patch_half.batches and b.queue_depth:  # wait until page 0 is inside the forward
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        queued = [asyncio.ensure_future(b.submit(page_png(i))) for i in (1, 2)]
        await asyncio.sleep(0.05)
        assert b.queue_depth == 2 and b.inflight == 3
        with pytest.raises(ResourceExhausted, match="queue is full") as info:
            await b.submit(page_png(3))
        assert info.value.retry_after_s and info.value.retry_after_s > 0
        patch_half.gate.set()
        await asyncio.gather(first, *queued)
        assert b.queue_depth == 0 and b.inflight == 0
        await b.submit(page_png(4))  # admitted again once the backlog cleared
    finally:
        patch_half.gate.set()
        await b.stop()


async def test_bad_page_fails_alone(patch_half: PatchHalf):
    patch_half.delay_s = 0.02
    b = await _started(patch_half)
    try:
        results = await asyncio.gather(
            b.submit(page_png(0)), b.submit(b"not an image"), b.submit(page_png(1), "no-such-mode"),
            b.submit(page_png(2)), return_exceptions=True,
        )
    finally:
        await b.stop()
    assert not isinstance(results[0], Exception) and not isinstance(results[3], Exception)
    assert isinstance(results[1], InvalidInput) and "not a PNG or JPEG" in results[1].message
    assert isinstance(results[2], InvalidInput) and "unknown mode 'no-such-mode'" in results[2].message
    assert b.queue_depth == 0 and b.inflight == 0


async def test_failing_batch_is_rerun_page_by_page(patch_half: PatchHalf):
    patch_half.fail_on_black = True
    patch_half.gate = threading.Event()
    b = await _started(patch_half, max_batch_size=4, max_wait_ms=50.0)
    try:
        subs = [asyncio.ensure_future(b.submit(x)) for x in (page_png(0), solid_png((0, 0, 0)), page_png(1))]
        await asyncio.sleep(0.2)
        patch_half.gate.set()
        results = await asyncio.gather(*subs, return_exceptions=True)
    finally:
        await b.stop()
    assert isinstance(results[1], InternalError) and "RuntimeError" in results[1].message
    assert not isinstance(results[0], Exception) and not isinstance(results[2], Exception)
    torch.testing.assert_close(results[2].page.segments[0].vision_tokens, patch_half.reference(page_png(1)))


async def test_cancelled_pages_leave_the_queue(patch_half: PatchHalf):
    patch_half.gate = threading.Event()
    b = await _started(patch_half, max_batch_size=1, max_wait_ms=0.0)
    try:
        first = asyncio.ensure_future(b.submit(page_png(0), stream_id="a"))
        await asyncio.sleep(0.1)  # page 0 is inside the (gated) forward
        mine = [asyncio.ensure_future(b.submit(page_png(i), stream_id="b")) for i in (1, 2)]
        other = asyncio.ensure_future(b.submit(page_png(3), stream_id="c"))
        await asyncio.sleep(0.1)
        assert b.queue_depth == 3
        assert b.cancel_stream("b") == 2
        mine[0].cancel()  # a cancelled awaiting task also leaves (both paths together)
        res = await asyncio.gather(*mine, return_exceptions=True)
        assert isinstance(res[1], Cancelled)
        assert b.queue_depth == 1
        patch_half.gate.set()
        await asyncio.gather(first, other)
    finally:
        patch_half.gate.set()
        await b.stop()
    assert sum(n for _, n in patch_half.batches) == 2  # pages 1 and 2 never reached the model
    assert b.queue_depth == 0 and b.inflight == 0


async def test_not_running_is_unavailable(patch_half: PatchHalf):
    b = MicroBatcher(BatchLimits(), _metrics()[0])
    with pytest.raises(Unavailable):
        await b.submit(page_png(0))
    await b.start(patch_half)
    await b.stop()
    with pytest.raises(Unavailable):
        await b.submit(page_png(0))


async def test_stop_fails_queued_and_running_pages_instead_of_hanging(patch_half: PatchHalf):
    patch_half.gate = threading.Event()
    b = await _started(patch_half, max_batch_size=1, max_wait_ms=0.0)
    try:
        running = asyncio.ensure_future(b.submit(page_png(0)))
        await asyncio.sleep(0.1)
        queued = asyncio.ensure_future(b.submit(page_png(1)))
        await asyncio.sleep(0.05)
        await b.stop()
        res = await asyncio.wait_for(asyncio.gather(running, queued, return_exceptions=True), 5)
    finally:
        patch_half.gate.set()
    assert all(isinstance(r, Unavailable) for r in res), res
    assert b.queue_depth == 0 and b.inflight == 0


async def test_metrics_are_recorded(patch_half: PatchHalf):
    metrics, reader = _metrics()
    patch_half.delay_s = 0.03
    b = MicroBatcher(BatchLimits(max_batch_size=4, max_wait_ms=5.0), metrics)
    await b.start(patch_half)
    try:
        await asyncio.gather(*(b.submit(page_png(i)) for i in range(6)), b.submit(b"junk"), return_exceptions=True)
    finally:
        await b.stop()
    pts = _points(reader)
    assert pts["inkstream.encoder.pages_encoded"][0].value == 6
    hist = pts["inkstream.encoder.batch_size"][0]
    assert hist.count == len(patch_half.batches) and hist.sum == 6
    assert pts["inkstream.encoder.encode_latency"][0].count == 6
    assert pts["inkstream.encoder.queue_depth"][0].value == 0
    assert pts["inkstream.encoder.inflight_pages"][0].value == 0
    rejected = {p.attributes["reason"]: p.value for p in pts["inkstream.encoder.rejected_pages"]}
    assert rejected == {"INVALID_ARGUMENT": 1}
