"""The page-accounting guard between a :class:`gateway.types.PagePipeline` and a response: the page
results of a document's selected pages in page order, each exactly once, whatever the pipeline does.

A page the pipeline skips becomes an INTERNAL error page, one it returns twice or unselected is
dropped (both logged); pages not done by the request's deadline come back as DEADLINE_EXCEEDED
(a job's message names the job's deadline).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator

from gateway.ingest import page_stream
from gateway.ingest.document import Document
from gateway.output.stitch import error_page, page_result
from gateway.types import PageOutcome, PagePipeline, PipelineOptions
from inkstream.errors import DeadlineExceeded, InkstreamError, as_inkstream_error
from inkstream.fair import BATCH
from inkstream.page_result import PageResult

log = logging.getLogger("inkstream.gateway.service")
#: the error of a page not read by the deadline: a synchronous request's, a job's (``priority`` BATCH)
_LATE = {False: "the document was not finished within the request deadline",
         True: "the job was not finished within its deadline (the gateway's stores.job_deadline_s, counted from "
               "its submission); submit it again when the gateway is less busy, or ask for fewer pages"}


async def pages_in_order(pipeline: PagePipeline, doc: Document, indices: list[int], options: PipelineOptions, *,
                         lookahead: int, render_timeout_s: float, model_id: str = ""
                         ) -> AsyncGenerator[PageResult, None]:
    """Page results of ``indices`` (0-based, in this order) of ``doc`` read through ``pipeline``.

    ``options.deadline`` (event-loop time, None = none) ends the wait for the remaining pages;
    ``lookahead``: pages rendered ahead of the pipeline; ``render_timeout_s``: seconds one page may
    take to render; ``model_id``: the model that reads them (its confidence calibration,
    :func:`gateway.output.stitch.page_result`). An error raised by the pipeline before its first
    page (e.g. ResourceExhausted, Unavailable) propagates; after that, the remaining pages carry it.
    """
    loop = asyncio.get_running_loop()
    rid = {"request_id": options.request_id}
    pending = list(indices)  # still owed, in order
    wanted = set(indices)
    inputs = page_stream(doc, indices, lookahead, render_timeout_s)
    outcomes = pipeline.run(inputs, options)
    failure: InkstreamError | None = None
    try:
        while pending:
            try:
                outcome = await _next_before(outcomes, options.deadline, loop)
            except StopAsyncIteration:
                break
            except TimeoutError:
                failure = DeadlineExceeded(_LATE[options.priority == BATCH])
                break
            except Exception as exc:  # after the first page, errors become page errors
                if len(pending) == len(indices):
                    raise
                if not isinstance(exc, InkstreamError):
                    log.exception("pipeline failed", extra=rid)
                failure = as_inkstream_error(exc)
                break
            if outcome.index not in wanted or outcome.index not in pending:
                log.error("pipeline returned page %d unexpectedly (duplicate or not selected); dropped",
                          outcome.index + 1, extra=rid)
                continue
            while pending[0] != outcome.index:  # pages the pipeline skipped
                skipped = pending.pop(0)
                log.error("pipeline skipped page %d", skipped + 1, extra=rid)
                yield error_page(skipped, "INTERNAL", "the pipeline returned no result for this page")
            pending.pop(0)
            yield page_result(outcome, doc.sizes.get(outcome.index), model_id)
    finally:
        with contextlib.suppress(Exception):
            await outcomes.aclose()
        with contextlib.suppress(Exception):
            await inputs.aclose()
    for index in pending:
        if failure is not None:
            yield error_page(index, failure.code_name, failure.message, failure.reason)
        else:
            yield error_page(index, "INTERNAL", "the pipeline returned no result for this page")


async def _next_before(outcomes: AsyncIterator[PageOutcome], deadline: float | None,
                       loop: asyncio.AbstractEventLoop) -> PageOutcome:
    """The next outcome, or TimeoutError at ``deadline`` (loop time; None = no deadline).

    Uses asyncio.wait instead of wait_for: Python 3.11's wait_for can swallow a cancellation that
    arrives as the awaited item completes (gh-86296), which would let a cancelled job run on.
    """
    if deadline is None:
        return await anext(outcomes)
    step = asyncio.ensure_future(anext(outcomes))
    try:
        done, _ = await asyncio.wait({step}, timeout=max(0.0, deadline - loop.time()))
    finally:
        if not step.done():
            step.cancel()
            with contextlib.suppress(BaseException):
                await step
    if not done:
        raise TimeoutError
    return step.result()
