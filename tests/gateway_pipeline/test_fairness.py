"""Fair admission: pages of concurrent requests take a replica's window in turn, interactive first."""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest

from gateway.types import PipelineOptions
from inkstream.fair import BATCH, INTERACTIVE, WorkKey
from inkstream.fair_window import FairWindow

from .test_pipeline import PageSource, cluster, make_pages  # noqa: F401 - cluster is a fixture

pytestmark = pytest.mark.timeout(60)


async def _grant_order(window: FairWindow, holders: list[WorkKey], keys: list[WorkKey]) -> list[str]:
    """Queue one waiter per key (in order) on a window full with ``holders``' slots, then release
    slots one at a time, the oldest holder's first.
    """
    order: list[str] = []

    async def one(k: WorkKey, tag: str):
        await window.acquire(k)
        order.append(tag)
        holders.append(k)

    tasks = []
    for i, k in enumerate(keys):
        tasks.append(asyncio.ensure_future(one(k, f"{k.request_id}{i}")))
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    for _ in keys:
        window.release(holders.pop(0))
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    return order


async def test_freed_slots_go_round_robin_over_requests():
    w = FairWindow(2)
    await w.acquire(WorkKey("big"))
    await w.acquire(WorkKey("big"))  # the window is full
    keys = [WorkKey("big")] * 4 + [WorkKey("small")]
    order = await _grant_order(w, [WorkKey("big")] * 2, keys)
    # FIFO would serve big0..big3 first; "small" holds nothing, "big" the rest of the window: "small" is next.
    assert order[0] == "small4", order
    assert [t for t in order if t.startswith("big")] == ["big0", "big1", "big2", "big3"]  # FIFO within a request


async def test_freed_slots_go_to_the_request_holding_fewest_then_in_turn():
    w = FairWindow(4)
    for _ in range(3):
        await w.acquire(WorkKey("big"))
    await w.acquire(WorkKey("mid"))  # full: big holds 3, mid 1
    waiters = [asyncio.ensure_future(w.acquire(WorkKey(k))) for k in ("big", "mid", "new", "mid")]
    await asyncio.sleep(0)
    w.release(WorkKey("big"))  # big 2, mid 1, new 0: "new" first although it queued after them
    await asyncio.sleep(0)
    assert [f.done() for f in waiters] == [False, False, True, False]
    w.release(WorkKey("big"))  # big 1, mid 1, new 1: in turn, and big queued first
    await asyncio.sleep(0)
    assert [f.done() for f in waiters] == [True, False, True, False]
    w.release(WorkKey("new"))  # big 2, mid 1, new 0 (none waiting): mid's first waiter
    await asyncio.sleep(0)
    assert [f.done() for f in waiters] == [True, True, True, False]
    assert w.held(WorkKey("mid")) == 2 and w.held(WorkKey("new")) == 0 and w.used == 4
    waiters[3].cancel()
    await asyncio.gather(*waiters, return_exceptions=True)


async def test_interactive_pages_go_before_batch_jobs():
    w = FairWindow(1)
    await w.acquire(WorkKey("job", BATCH))
    keys = [WorkKey("job", BATCH)] * 3 + [WorkKey("sync", INTERACTIVE)] * 2
    order = await _grant_order(w, [WorkKey("job", BATCH)], keys)
    assert order[:2] == ["sync3", "sync4"], order


async def test_a_cancelled_waiter_takes_no_slot_and_a_granted_one_passes_it_on():
    w = FairWindow(1)
    await w.acquire(WorkKey("a"))
    b = asyncio.ensure_future(w.acquire(WorkKey("b")))
    c = asyncio.ensure_future(w.acquire(WorkKey("c")))
    await asyncio.sleep(0)
    b.cancel()
    await asyncio.sleep(0)
    w.release(WorkKey("a"))  # goes to c, not to the cancelled b
    await asyncio.wait_for(c, 1)
    assert w.used == 1 and w.waiting == 0
    d = asyncio.ensure_future(w.acquire(WorkKey("d")))
    await asyncio.sleep(0)
    w.release(WorkKey("c"))  # granted to d ...
    d.cancel()  # ... which is cancelled in the same moment: the slot is handed back
    await asyncio.gather(d, return_exceptions=True)
    assert w.used == 0
    w.resize(3)
    for k in "xyz":
        await asyncio.wait_for(w.acquire(WorkKey(k)), 1)
    assert w.used == 3


async def _latencies(pipeline, n: int, seed: int, tag: str) -> list[float]:
    async def one(i: int) -> float:
        t0 = time.monotonic()
        outs = [o async for o in pipeline.run(PageSource(make_pages(1, seed=seed + i)).__aiter__(),
                                              PipelineOptions(request_id=f"{tag}-{i}"))]
        assert [o.status for o in outs] == ["ok"]
        return time.monotonic() - t0

    return list(await asyncio.gather(*(one(i) for i in range(n))))



async def test_express_slot_lets_a_request_with_nothing_in_flight_in_at_once():
    w = FairWindow(2, express=1)
    big, small, other = WorkKey("big"), WorkKey("small"), WorkKey("other")
    await w.acquire(big)
    await w.acquire(big)  # the window is full of the long document's pages
    queued = asyncio.ensure_future(w.acquire(big))
    await asyncio.sleep(0)
    await asyncio.wait_for(w.acquire(small), 1)  # nothing of "small" in flight: the express slot, at once
    assert (w.used, w.express_used) == (2, 1) and not queued.done()
    second = asyncio.ensure_future(w.acquire(small))  # "small" holds a slot now: it waits its turn
    third = asyncio.ensure_future(w.acquire(other))  # the express slot is taken: waits too
    await asyncio.sleep(0)
    assert not second.done() and not third.done()
    w.release(big)  # a slot of the window is free: "other" holds none, it goes first
    await asyncio.sleep(0)
    assert third.done() and not (queued.done() or second.done())
    w.release(small)  # the express slot: the window itself stays full, no grant
    await asyncio.sleep(0)
    assert (w.used, w.express_used) == (2, 0) and not (queued.done() or second.done())
    await asyncio.wait_for(w.acquire(small), 1)  # holds none again: the express slot again
    w.release(other)  # big 1, small 1: in turn, big queued first
    await asyncio.sleep(0)
    assert queued.done() and not second.done()
    second.cancel()
    await asyncio.gather(queued, second, third, return_exceptions=True)


async def test_an_express_slot_does_not_take_a_slot_of_the_window_from_the_others():
    """While a small request holds the express slot, the long document keeps all of the window
    (it used to lose the next freed slot to it, and the replica idled)."""
    w = FairWindow(2, express=1)
    big, small = WorkKey("big"), WorkKey("small")
    await w.acquire(big)
    await w.acquire(big)
    await w.acquire(small)  # express
    nxt = asyncio.ensure_future(w.acquire(big))
    await asyncio.sleep(0)
    w.release(big)  # one of big's pages is done while small's is still in flight: big's next goes at once
    await asyncio.wait_for(nxt, 1)
    assert (w.used, w.express_used, w.held(big), w.held(small)) == (2, 1, 2, 1)
    w.release(small)
    job = asyncio.ensure_future(w.acquire(WorkKey("job", BATCH)))  # no express slot for a job: it waits
    await asyncio.sleep(0)
    assert not job.done() and w.express_used == 0
    job.cancel()
    await asyncio.gather(job, return_exceptions=True)


async def test_a_window_without_express_slots_keeps_its_capacity():
    w = FairWindow(1)
    await w.acquire(WorkKey("big"))
    small = asyncio.ensure_future(w.acquire(WorkKey("small")))
    await asyncio.sleep(0)
    assert not small.done() and w.express_used == 0
    w.release(WorkKey("big"))
    await asyncio.wait_for(small, 1)
    assert w.used == 1
    with pytest.raises(ValueError):
        FairWindow(1, express=-1)

async def test_small_requests_are_not_queued_behind_a_long_document(cluster):  # noqa: F811 - the fixture
    """Ten 1-page requests beside a 100-page document finish within 3x their latency alone (the
    encoder window is the bottleneck here: two pages at a time, 50 ms each)."""
    c = await cluster.start(max_pages_per_request=24, enc_delay=0.05, dec_delay=0.0)
    c.encoders[0].max_queue_pages, c.encoders[0].max_batch_size = 1, 1
    alone = statistics.median(await _latencies(c.pipeline, 10, 100, "alone"))
    big = asyncio.ensure_future(_drain(c.pipeline, make_pages(100, seed=7)))
    await asyncio.sleep(0.5)  # the document fills its window and the encoder's
    beside = await _latencies(c.pipeline, 10, 200, "beside")
    assert not big.done(), "the long document should still be running"
    assert max(beside) <= 3 * max(alone, 0.05) + 0.1, (alone, beside)
    assert await big == 100


async def _drain(pipeline, images) -> int:
    n = 0
    async for o in pipeline.run(PageSource(images).__aiter__(), PipelineOptions(request_id="long")):
        assert o.status == "ok"
        n += 1
    return n
