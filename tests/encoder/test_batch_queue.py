"""The encoder's batch queue in fair order (inkstream.fair): priority class, round-robin over requests."""

from __future__ import annotations

import asyncio
import threading

from encoder_service.batch_queue import BatchQueue, QueuedPage
from encoder_service.batch_types import BatchLimits
from encoder_service.batcher import MicroBatcher
from inkstream.fair import BATCH, INTERACTIVE, WorkKey
from models.base import PreparedPage
from tests.encoder.doubles import PatchHalf, page_png


def _page(loop: asyncio.AbstractEventLoop, tag: str, key: WorkKey, t: float, shape: str = "s") -> QueuedPage:
    prepared = PreparedPage(batch_key=shape, tensors={}, width=1, height=1, meta={"tag": tag})
    return QueuedPage(prepared, loop.create_future(), t, stream_id=key.request_id, key=key)


def _tags(pages: list[QueuedPage]) -> list[str]:
    return [p.prepared.meta["tag"] for p in pages]


async def test_a_small_request_rides_in_the_next_batch_beside_a_long_document():
    loop = asyncio.get_running_loop()
    q = BatchQueue(max_batch_size=4, max_wait_s=0.01)
    for i in range(12):  # a long document's queued pages, all in before the small one
        q.push(_page(loop, f"long{i}", WorkKey("long"), 0.0))
    q.push(_page(loop, "small", WorkKey("small"), 1.0))
    batch, popped = q.pop_ready(now=1.0)
    # FIFO would run long0..long3, then long4..long7, ... and the small page after 12 pages.
    assert _tags(batch) == ["long0", "small", "long1", "long2"]
    assert popped == batch
    batch, _ = q.pop_ready(now=1.0)
    assert _tags(batch) == ["long3", "long4", "long5", "long6"]  # FIFO within the long document


async def test_with_pages_in_service_counted_the_small_request_leads_the_batch():
    loop = asyncio.get_running_loop()
    in_service = {"long": 13, "small": 1}  # the batcher's count of pages in the encoder
    q = BatchQueue(max_batch_size=1, max_wait_s=0.01, in_service=in_service)
    for i in range(3):
        q.push(_page(loop, f"long{i}", WorkKey("long"), 0.0))
    q.push(_page(loop, "small", WorkKey("small"), 1.0))
    batch, _ = q.pop_ready(now=1.0)
    assert _tags(batch) == ["small"]  # plain round-robin: long0 (queued first)


async def test_no_batch_job_batch_starts_while_an_interactive_page_waits():
    loop = asyncio.get_running_loop()
    q = BatchQueue(max_batch_size=2, max_wait_s=0.5)
    for i in range(4):  # a full group of an asynchronous job's pages, ready at once
        q.push(_page(loop, f"job{i}", WorkKey("job", BATCH), 0.0, shape="a"))
    q.push(_page(loop, "sync", WorkKey("sync", INTERACTIVE), 1.0, shape="b"))  # not ready until 1.5
    assert q.pop_ready(now=1.1) == ([], [])  # the job's full batch waits for the interactive page
    assert q.next_deadline(now=1.1) == 0.0  # the job's pages are past their window: wake at once
    batch, _ = q.pop_ready(now=1.5)
    assert _tags(batch) == ["sync"]
    batch, _ = q.pop_ready(now=1.5)
    assert _tags(batch) == ["job0", "job1"]


async def test_cancelled_pages_are_popped_but_not_batched():
    loop = asyncio.get_running_loop()
    q = BatchQueue(max_batch_size=2, max_wait_s=0.0)
    gone = _page(loop, "gone", WorkKey("a"), 0.0)
    keep = _page(loop, "keep", WorkKey("b"), 0.0)
    q.push(gone)
    q.push(keep)
    gone.future.cancel()
    batch, popped = q.pop_ready(now=0.0)
    assert _tags(batch) == ["keep"] and set(map(id, popped)) == {id(gone), id(keep)}
    assert list(q) == []


async def test_preprocessing_threads_are_given_out_in_fair_order(patch_half: PatchHalf):
    """With the preprocessing threads busy with a long document, a small request's page is prepared
    next, after the page in progress only, not after the document's queued pages (the thread
    pool's own queue is FIFO).
    """
    order: list[str] = []
    gate = threading.Event()
    prepare = patch_half.preprocess

    def gated_preprocess(image, mode):
        gate.wait(5)
        page = prepare(image, mode)
        order.append(str(image.size))
        return page

    patch_half.preprocess = gated_preprocess  # type: ignore[method-assign]
    b = MicroBatcher(BatchLimits(max_batch_size=8, max_wait_ms=0.0, preprocess_threads=1))
    await b.start(patch_half)
    try:
        long_pages = [asyncio.ensure_future(b.submit(page_png(i, size=(40, 56 + i)), key=WorkKey("long")))
                      for i in range(6)]
        await asyncio.sleep(0.05)  # long page 0 holds the one thread; pages 1..5 wait for it
        small = asyncio.ensure_future(b.submit(page_png(9, size=(99, 99)), key=WorkKey("small")))
        await asyncio.sleep(0.05)
        gate.set()
        await asyncio.gather(small, *long_pages)
    finally:
        gate.set()
        await b.stop()
    # Right after the page in progress: "long" has six pages in the encoder, "small" one (plain
    # round-robin gave "long" one more turn first, and the probe waited for two preparations).
    assert order.index("(99, 99)") == 1, order
