"""The gateway's front-end core, shared by REST, gRPC and jobs: upload -> document -> pipeline ->
page results, with the result cache and the page-accounting guard.

No generated stubs and no HTTP here. A request goes through two phases so that front ends can turn
early problems into a status code before any output is sent:

1. :meth:`OcrService.prepare` — options, encoder mode, type detection, limits, page selection
   (4xx raised here);
2. :meth:`Prepared.pages` — page results in page order, each selected page exactly once, as soon
   as each is ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import asdict, dataclass
from typing import Any

from gateway.config import GatewayConfig
from gateway.ingest import UploadedFile, close_document, open_document, page_stream, parse_pages
from gateway.ingest.document import Document
from gateway.output.page import PageResult
from gateway.output.stitch import FORMATS, error_page, page_result
from gateway.routing.fair import INTERACTIVE
from gateway.stores.cache import ResultCache, cache_key
from gateway.types import PageOutcome, PagePipeline, PipelineOptions, RequestSlot
from inkstream.errors import DeadlineExceeded, InkstreamError, InvalidInput, Unavailable, as_inkstream_error

log = logging.getLogger("inkstream.gateway.service")

#: Task names the gateway documents (proto: "ocr" | "markdown"); a decoder may offer more
#: (deepseek_ocr2: "figure", "describe"). Any name of this shape is passed on; the decoder's Info
#: decides (see :meth:`OcrService.check_task`).
_TASK_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")

#: Retry-After (seconds) of the 503 given while no encoder or decoder replica is SERVING: about one
#: health-watch round plus a replica's restart on a warm machine.
NOT_SERVING_RETRY_AFTER_S = 5.0


def run_id(request_id: str | None, client_supplied: bool) -> str:
    """The key of one request for admission and the pipeline (and the id its replicas log).

    A fresh id (made by the tracing middleware / interceptor) is used as is, so one request id runs
    through gateway, encoder and decoder. An id the client supplied gets a random suffix
    (``<id>.<8 hex>``): clients reuse ids (a retry after a timeout while the first attempt still
    runs), and two live requests must never share an admission ticket. Kept within 128 characters.
    """
    if not request_id:
        return uuid.uuid4().hex
    if not client_supplied:
        return request_id
    return f"{request_id[:119]}.{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class OcrRequest:
    """Options of one OCR request. ``format`` "markdown" | "text" | "json"; ``pages`` 1-based
    selection ("" = all); ``mode`` encoder resolution mode ("" = default); ``task`` "ocr" (free OCR)
    | "markdown" (layout with grounding) | another task the decoder offers | "" (decoder default);
    ``password`` for encrypted PDFs; ``max_new_tokens`` generated tokens at most per segment (0 =
    the decoder's default) and ``temperature`` (0 = greedy) for the decoder (the OpenAI-compatible
    route sets them; a sampled answer is neither taken from nor put in the result cache).
    """

    format: str = "markdown"
    pages: str = ""
    mode: str = ""
    task: str = ""
    password: str = ""
    max_new_tokens: int = 0
    temperature: float = 0.0

    def validated(self) -> OcrRequest:
        """Self with defaults filled; raises InvalidInput (400) naming the accepted values."""
        fmt = (self.format or "markdown").strip().lower()
        if fmt not in FORMATS:
            raise InvalidInput(f"unknown format {self.format!r}; use one of: {', '.join(FORMATS)}")
        task = (self.task or "").strip().lower()
        if task and not _TASK_NAME.match(task):
            raise InvalidInput(f"invalid task {self.task!r}; use 'ocr' (free OCR) or 'markdown' (layout)")
        if self.max_new_tokens < 0 or not 0.0 <= self.temperature <= 2.0:
            raise InvalidInput("max_new_tokens must be >= 0 and temperature in [0, 2]")
        return OcrRequest(fmt, (self.pages or "").strip(), (self.mode or "").strip(), task, self.password or "",
                          self.max_new_tokens, self.temperature)

    def public(self) -> dict[str, Any]:
        """The options without the password (what is stored with a job)."""
        d = asdict(self)
        d.pop("password")
        for name in ("max_new_tokens", "temperature"):  # decoder settings: listed only when set
            if not d[name]:
                d.pop(name)
        return d


class Prepared:
    """A validated request with its opened document. Iterate :meth:`pages` once, then :meth:`close`
    (or use ``async with``).
    """

    def __init__(self, service: OcrService, upload: UploadedFile, request: OcrRequest, doc: Document,
                 indices: list[int], model_id: str, mode: str, request_id: str):
        self.service = service
        self.upload = upload
        self.request = request
        self.doc = doc
        self.indices = indices
        self.model_id = model_id
        self.mode = mode
        self.request_id = request_id
        self.started = time.monotonic()
        self.cache_hit = False
        self._closed = False

    @property
    def page_count(self) -> int:
        """Pages that will be returned (after selection)."""
        return len(self.indices)

    async def __aenter__(self) -> Prepared:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the document (idempotent)."""
        if not self._closed:
            self._closed = True
            await close_document(self.doc)

    async def pages(self, deadline_s: float | None = None,
                    priority: int = INTERACTIVE) -> AsyncGenerator[PageResult, None]:
        """Page results in page order, each selected page exactly once.

        From the cache when possible. A page missing from, or duplicated by, the pipeline is reported
        as an INTERNAL error / dropped (and logged). ``deadline_s`` (seconds from now): pages not done
        by then come back as DEADLINE_EXCEEDED errors (until then a page waits for a replica that is
        down to come back); ``priority``: :data:`gateway.routing.fair.INTERACTIVE` (a client waits) or
        :data:`gateway.routing.fair.BATCH` (an asynchronous job: its pages yield to interactive ones). An
        error raised by the pipeline before its first page (e.g. ResourceExhausted, Unavailable)
        propagates; after that, remaining pages carry it.
        """
        svc = self.service
        key = cache_key(self.upload.sha256, self.model_id, self.mode, self.request.task, self.indices,
                        self.request.max_new_tokens)
        use_cache = svc.cache is not None and self.request.temperature == 0.0
        if svc.cache is not None and use_cache:
            cached = svc.cache.get(key)
            if cached is not None and [p.index - 1 for p in cached] == self.indices:
                self.cache_hit = True
                for p in cached:
                    yield p
                return
        results: list[PageResult] = []
        run = self._run(deadline_s, priority)
        try:
            async for p in run:
                results.append(p)
                yield p
        finally:  # also when our consumer stops early: stop the pipeline and the renderer now
            await run.aclose()
        if svc.cache is not None and use_cache:
            svc.cache.put(key, results)

    async def _run(self, deadline_s: float | None, priority: int) -> AsyncGenerator[PageResult, None]:
        loop = asyncio.get_running_loop()
        deadline = None if deadline_s is None else loop.time() + deadline_s
        options = PipelineOptions(mode=self.mode,  # the encoder's own spelling of the mode
                                   task=self.request.task, request_id=self.request_id,
                                   max_new_tokens=self.request.max_new_tokens, temperature=self.request.temperature,
                                   priority=priority, deadline=deadline)
        pending = list(self.indices)  # still owed, in order
        wanted = set(self.indices)
        inputs = page_stream(self.doc, self.indices, self.service.config.render_lookahead_pages,
                             self.service.render_timeout_s)
        outcomes = self.service.pipeline.run(inputs, options)
        failure: InkstreamError | None = None
        try:
            while pending:
                try:
                    outcome = await _next_before(outcomes, deadline, loop)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    failure = DeadlineExceeded("the document was not finished within the request deadline")
                    break
                except Exception as exc:  # after the first page, errors become page errors
                    if len(pending) == len(self.indices):
                        raise
                    if not isinstance(exc, InkstreamError):
                        log.exception("pipeline failed", extra={"request_id": self.request_id})
                    failure = as_inkstream_error(exc)
                    break
                if outcome.index not in wanted or outcome.index not in pending:
                    log.error("pipeline returned page %d unexpectedly (duplicate or not selected); dropped",
                              outcome.index + 1, extra={"request_id": self.request_id})
                    continue
                while pending[0] != outcome.index:  # pages the pipeline skipped
                    skipped = pending.pop(0)
                    log.error("pipeline skipped page %d", skipped + 1, extra={"request_id": self.request_id})
                    yield error_page(skipped, "INTERNAL", "the pipeline returned no result for this page")
                pending.pop(0)
                yield page_result(outcome, self.doc.sizes.get(outcome.index), self.model_id)
        finally:
            with contextlib.suppress(Exception):
                await outcomes.aclose()
            with contextlib.suppress(Exception):
                await inputs.aclose()
        for index in pending:
            if failure is not None:
                yield error_page(index, failure.code_name, failure.message)
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


class OcrService:
    """Ties ingest, the :class:`gateway.types.PagePipeline` and the cache together (one per process)."""

    def __init__(self, config: GatewayConfig, pipeline: PagePipeline, cache: ResultCache | None = None,
                 render_timeout_s: float = 120.0):
        self.config = config
        self.pipeline = pipeline
        self.cache = cache
        self.render_timeout_s = render_timeout_s

    def admit(self, request_id: str) -> RequestSlot:
        """The pipeline's admission (raises ResourceExhausted -> 429 when the gateway is full)."""
        return self.pipeline.admit(request_id)

    async def ready(self) -> tuple[bool, str]:
        """(ready, reason): ready when at least one encoder and one decoder replica are SERVING.

        Uses the pipeline's ``ready()`` (bool, or (bool, reason)) when it has one; otherwise asks for
        the encoder Info as a proxy (it needs a reachable encoder).
        """
        probe = getattr(self.pipeline, "ready", None)
        try:
            if probe is not None:
                res = probe()
                if asyncio.iscoroutine(res):
                    res = await res
                if isinstance(res, tuple):
                    return bool(res[0]), str(res[1])
                return bool(res), "" if res else "no SERVING encoder or decoder replica"
            await asyncio.wait_for(self.pipeline.encoder_info(), 5.0)
            return True, ""
        except Exception as exc:  # noqa: BLE001 - readiness never raises
            return False, as_inkstream_error(exc).message

    async def check_serving(self) -> None:
        """Unavailable (503 + Retry-After) when the pipeline says no encoder or no decoder replica is
        SERVING, so a document is refused at once instead of every page waiting for a replica and
        coming back as an UNAVAILABLE page error. Only with a pipeline that has ``ready()``.
        """
        if getattr(self.pipeline, "ready", None) is None:
            return
        ok, reason = await self.ready()
        if not ok:
            raise Unavailable(f"the gateway cannot read documents now ({reason}); retry shortly",
                              retry_after_s=NOT_SERVING_RETRY_AFTER_S)

    async def check_task(self, task: str) -> None:
        """InvalidInput (400) naming the decoder's tasks when ``task`` is not one of them. Uses the
        pipeline's ``decoder_tasks()`` (list of names, sync or async) when it has one; without it the
        decoder rejects an unknown task per page (INVALID_ARGUMENT page errors).
        """
        probe = getattr(self.pipeline, "decoder_tasks", None)
        if not task or probe is None:
            return
        tasks = probe()
        if asyncio.iscoroutine(tasks):
            tasks = await tasks
        if tasks and task not in tasks:
            raise InvalidInput(f"unknown task {task!r}; this model supports: {', '.join(tasks)}")

    async def prepare(self, upload: UploadedFile, request: OcrRequest, request_id: str = "") -> Prepared:
        """Validate options and the document; raises 4xx InkstreamErrors with a message for a person,
        Unavailable (503) when no encoder answers its Info.
        """
        request = request.validated()
        await self.check_serving()
        await self.check_task(request.task)
        info = await self.pipeline.encoder_info()
        mode = info.mode(request.mode)
        limits = self.config.limits
        doc = await open_document(upload, long_side_px=mode.page_long_side_px, max_pixels=limits.max_page_pixels,
                                  max_pages=limits.max_pages, min_side=limits.min_page_side_px,
                                  password=request.password, max_image_bytes=info.max_image_bytes)
        try:
            indices = parse_pages(request.pages, doc.page_count, limits.max_pages)
        except BaseException:
            await close_document(doc)
            raise
        return Prepared(self, upload, request, doc, indices, info.model_id, mode.name, request_id)
