"""Deadlines that fit the work (gateway.routing.deadline_fit): a synchronous document that cannot be read in
time at the measured rate is refused before any page is sent; one that can is read whole.
"""

from __future__ import annotations

import asyncio

import pytest

from gateway.routing.deadline_fit import DocumentLoad, stage_seconds_per_page
from gateway.types import PipelineOptions
from inkstream import errors
from inkstream.fair import BATCH
from inkstream.pace import ServiceRate

from .test_pipeline import PageSource, cluster, make_pages  # noqa: F401 - cluster is a fixture

pytestmark = pytest.mark.timeout(60)


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _rate(seconds_per_page: float, pages: int = 8) -> ServiceRate:
    clock = _Clock()
    rate = ServiceRate(clock=clock)
    for _ in range(pages):
        rate.started()
        clock.t += seconds_per_page
        rate.finished()
    return rate


def test_the_estimate_counts_one_page_per_round_of_every_other_document():
    load = DocumentLoad(_rate(0.5))
    assert load.estimate_s(10) == pytest.approx(5.0)
    load.begin("long", 100)  # 100 pages left: 10 of them are read beside our 10
    load.begin("short", 3)  # 3 pages left: all of them
    assert load.estimate_s(10, "mine") == pytest.approx((10 + 10 + 3) * 0.5)
    load.page_done("short")
    load.end("long")
    assert load.estimate_s(10, "mine") == pytest.approx((10 + 2) * 0.5)


def test_unknown_rate_refuses_nothing_and_the_refusal_names_the_jobs_api():
    DocumentLoad(ServiceRate()).check("r", 10_000, 1.0)  # not measured: no refusal
    with pytest.raises(errors.TooLongForDeadline, match=r"POST /v1/jobs") as ei:
        DocumentLoad(_rate(2.0)).check("r", 300, 599.0)
    assert ei.value.http_status == 413 and ei.value.reason_name == "TOO_LONG_FOR_DEADLINE"
    DocumentLoad(_rate(2.0)).check("r", 300, 601.0)  # 300 x 2.0 s fits in 601 s


async def _read(pipeline, n_pages: int, rid: str, deadline_s: float | None, priority: int = 0):
    loop = asyncio.get_running_loop()
    options = PipelineOptions(request_id=rid, priority=priority, page_count=n_pages,
                              deadline=None if deadline_s is None else loop.time() + deadline_s)
    return [o async for o in pipeline.run(PageSource(make_pages(n_pages, seed=n_pages)).__aiter__(), options)]


async def test_a_300_page_request_is_refused_before_any_work_when_it_cannot_finish(cluster):  # noqa: F811 - the fixture
    # Scaled down: the stack is assumed to read a page in 20 ms, so 300 pages need 6 s; the
    # request may take 1 s. Unchanged, it would read ~50 pages and lose the rest to DEADLINE_EXCEEDED.
    c = await cluster.start(seconds_per_page_prior=0.02)
    with pytest.raises(errors.TooLongForDeadline, match="submit it as a job"):
        await _read(c.pipeline, 300, "big", deadline_s=1.0)
    assert sum(c.encoders[0].calls.values()) == 0  # refused before any page was sent
    # The same document as an asynchronous job (no synchronous deadline) is not refused.
    outs = await _read(c.pipeline, 20, "job", deadline_s=1.0, priority=BATCH)
    assert len(outs) == 20


async def test_a_300_page_request_that_fits_is_read_whole_at_the_measured_rate(cluster):  # noqa: F811 - the fixture
    c = await cluster.start(enc_delay=0.002, dec_delay=0.002)
    warm = await _read(c.pipeline, 16, "warm", deadline_s=None)  # measures the rate
    assert all(o.status == "ok" for o in warm)
    per_page = c.pipeline.pace.seconds_per_unit
    assert per_page is not None and per_page > 0
    outs = await _read(c.pipeline, 300, "big", deadline_s=max(30.0, 300 * per_page * 3))
    assert [o.index for o in outs] == list(range(300))
    assert all(o.status == "ok" for o in outs), {o.error for o in outs if o.status != "ok"}
    with pytest.raises(errors.TooLongForDeadline):  # measured, not assumed: far too little time is refused
        await _read(c.pipeline, 300, "again", deadline_s=300 * per_page / 10)


def test_a_stage_reads_as_many_pages_per_second_as_its_replicas_together():
    assert stage_seconds_per_page([2.0], 1) == pytest.approx(2.0)
    assert stage_seconds_per_page([2.0], 4) == pytest.approx(0.5)  # the others are assumed alike
    assert stage_seconds_per_page([1.0, 3.0], 2) == pytest.approx(1 / (1 / 1.0 + 1 / 3.0))
    assert stage_seconds_per_page([], 3) is None and stage_seconds_per_page([0.0], 1) is None
    assert stage_seconds_per_page([2.0], 0) is None


def test_before_measuring_the_configured_prior_then_the_replicas_rate_is_used():
    reported: list[float | None] = [None]
    load = DocumentLoad(ServiceRate(), lambda: reported[0])
    assert load.seconds_per_page() == (None, "")
    reported[0] = 3.0
    assert load.seconds_per_page() == (3.0, "the encoders' reported")
    with pytest.raises(errors.TooLongForDeadline, match=r"the encoders' reported 3\.00 s a page.*POST /v1/jobs"):
        load.check("r", 201, 600.0)
    load.check("r", 200, 600.0)
    assert DocumentLoad(ServiceRate(prior_s=1.0), lambda: 3.0).seconds_per_page() == (1.0, "the configured")
    assert DocumentLoad(_rate(0.5), lambda: 3.0).seconds_per_page() == (pytest.approx(0.5), "the measured")


async def test_a_fresh_stack_refuses_a_big_request_at_the_rate_its_encoders_report(cluster):  # noqa: F811 - the fixture
    # No page measured and no prior configured: the two encoders report 1 s a page each (their
    # warm-up's estimate), 0.5 s a page for the stack, so 300 pages need 150 s.
    c = await cluster.start(n_enc=2)
    for e in c.encoders:
        e.seconds_per_page = 1.0
    assert c.pipeline.pace.seconds_per_unit is None
    await c.pipeline.encoder_info()  # what the gateway reads before a request's pages (gateway.service)
    with pytest.raises(errors.TooLongForDeadline, match=r"150 s at the encoders' reported 0\.50 s a page"):
        await _read(c.pipeline, 300, "big", deadline_s=60.0)
    assert sum(sum(e.calls.values()) for e in c.encoders) == 0  # refused before any page was sent
    small = await _read(c.pipeline, 10, "small", deadline_s=60.0)  # 5 s at that rate: read
    assert [o.status for o in small] == ["ok"] * 10
    job = await _read(c.pipeline, 300, "job", deadline_s=60.0, priority=BATCH)  # a job: never refused for size
    assert [o.index for o in job] == list(range(300)) and all(o.status == "ok" for o in job)


async def test_replicas_that_report_no_rate_refuse_nothing_before_measuring(cluster):  # noqa: F811 - the fixture
    c = await cluster.start()
    await c.pipeline.encoder_info()
    outs = await _read(c.pipeline, 40, "big", deadline_s=60.0)
    assert len(outs) == 40
