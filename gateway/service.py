"""The gateway's front-end core, shared by REST, gRPC and jobs: upload -> document -> pipeline ->
page results, with the result cache and the page-accounting guard.

No generated stubs and no HTTP here. A request goes through two phases so that front ends can turn
early problems into a status code before any output is sent:

1. :meth:`OcrService.prepare` — options, encoder mode, type detection, limits, page selection
   (4xx raised here); the document is opened here, once per request;
2. :meth:`Prepared.pages` — page results in page order, each selected page exactly once, as soon
   as each is ready (:func:`gateway.routing.in_order.pages_in_order`).

:class:`gateway.scope.RequestScope` owns one request's resources from admission to clean-up; the
synchronous front ends (:class:`gateway.session.OcrSession`) and the job worker
(:mod:`gateway.jobs.run`) are both built on it.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from gateway import tenancy
from gateway.config import GatewayConfig
from gateway.ingest import UploadedFile, close_document, open_document, parse_pages
from gateway.ingest.document import Document
from gateway.ingest.selection import check_selection
from gateway.output.stitch import FORMATS
from gateway.routing.in_order import pages_in_order
from gateway.stores.cache import ResultCache, cache_key
from gateway.types import PagePipeline, PipelineOptions, RequestSlot
from inkstream.doc_types import DOC_TYPES
from inkstream.errors import InkstreamError, InvalidInput, Unavailable, as_inkstream_error
from inkstream.fair import INTERACTIVE
from inkstream.page_image import fit_pixels
from inkstream.page_result import PASSWORD_UNUSED, PageResult

#: Task names the gateway documents (proto: "ocr" | "markdown"); a decoder may offer more
#: (deepseek_ocr2: "figure", "describe"). Any name of this shape is passed on; the decoder's Info
#: decides (see :meth:`OcrService.check_task`).
_TASK_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def check_task_name(task: str, tasks: Sequence[str]) -> None:
    """InvalidInput (400) when ``task`` (lower-cased, "" = the decoder's default) is not one of ``tasks``,
    the served model's tasks (its decoders' Info), listing them; when they are not known (``tasks``
    empty), only a name that cannot be a task is refused, without a list (the decoder then rejects an
    unknown task per page). The accepted tasks are never taken from anywhere but the served model.
    """
    if not task:
        return
    if tasks:
        if task not in tasks:
            raise InvalidInput(f"unknown task {task!r}; this model supports: {', '.join(tasks)}")
    elif not _TASK_NAME.match(task):
        raise InvalidInput(f"invalid task {task!r}: a task is a name of lower-case letters, digits and '_' "
                           "(the served model's tasks cannot be listed now)")

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


def unknown_format(value: str, accepted: tuple[str, ...]) -> str:
    """The message for an output ``format`` that is not one of ``accepted`` (the output formats of the
    API asked); a document type's name or extension (``png``, ``.tiff``) is said to be one, since the
    document's own type is never an option (it is recognised from its bytes).
    """
    name = value.strip().lower().lstrip(".")
    doc_type = next((t.label for t in DOC_TYPES if name in (t.kind, t.label.lower(), *(e[1:] for e in t.extensions))),
                    None)
    hint = f" ({doc_type} is a document type: the gateway recognises it from the file's bytes)" if doc_type else ""
    return f"unknown format {value!r}; format is the output, one of: {', '.join(accepted)}{hint}"


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

    def validated(self, tasks: Sequence[str] = ()) -> OcrRequest:
        """Self with defaults filled; raises InvalidInput (400) naming the accepted values: for the task,
        ``tasks``, the served model's (:func:`check_task_name`; () when not known).
        """
        fmt = (self.format or "markdown").strip().lower()
        if fmt not in FORMATS:
            raise InvalidInput(unknown_format(self.format, FORMATS))
        task = (self.task or "").strip().lower()
        check_task_name(task, tasks)
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
                 indices: list[int], model_id: str, mode: str, request_id: str, revision: str = ""):
        self.service, self.upload, self.request, self.doc = service, upload, request, doc
        self.indices, self.model_id, self.mode, self.request_id = indices, model_id, mode, request_id
        self.revision = revision  # the encoders' weights revision ("" unknown): part of the cache key
        # the page that says a password was sent for a document that needs none (PASSWORD_UNUSED)
        self._password_note = indices[0] + 1 if indices and request.password and not doc.password_needed else 0
        self.started = time.monotonic()
        self.cache_hit = False  # whether the pages came from the result cache
        self._closed = False

    @property
    def page_count(self) -> int:
        """Pages that will be returned (after selection)."""
        return len(self.indices)

    def select(self, indices: list[int]) -> None:
        """Read only ``indices`` (0-based, a subset of the selection, in its order): a job continuing
        from its checkpoints. ValueError for a page outside the selection.
        """
        if not set(indices) <= set(self.indices):
            raise ValueError("Prepared.select: pages outside the request's selection")
        self.indices = [i for i in self.indices if i in set(indices)]

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

        From the cache when possible (looked up and written off the event loop, see
        :class:`gateway.stores.cache.ResultCache`). ``deadline_s`` (seconds from now): pages not done
        by then come back as DEADLINE_EXCEEDED errors (until then a page waits for a replica that is
        down to come back); ``priority``: :data:`inkstream.fair.INTERACTIVE` (a client waits) or
        :data:`inkstream.fair.BATCH` (an asynchronous job: its pages yield to interactive ones).
        Errors: see :func:`gateway.routing.in_order.pages_in_order`.
        """
        svc, req = self.service, self.request
        key = cache_key(self.upload.sha256, self.model_id, self.mode, req.task, self.indices, req.max_new_tokens,
                        tenancy.current().tenant, self.revision)
        cache = svc.cache if req.temperature == 0.0 else None  # a sampled answer is never cached
        if cache is not None:
            cached = await cache.get(key)
            if cached is not None and [p.index - 1 for p in cached] == self.indices:
                self.cache_hit = True
                for p in cached:
                    yield self._noted(p)
                return
        deadline = None if deadline_s is None else asyncio.get_running_loop().time() + deadline_s
        options = PipelineOptions(mode=self.mode,  # the encoder's own spelling of the mode
                                  task=req.task, request_id=self.request_id, max_new_tokens=req.max_new_tokens,
                                  temperature=req.temperature, priority=priority, deadline=deadline,
                                  page_count=len(self.indices))
        results: list[PageResult] = []
        run = pages_in_order(svc.pipeline, self.doc, self.indices, options,
                             lookahead=svc.config.render_lookahead_pages, render_timeout_s=svc.render_timeout_s,
                             model_id=self.model_id)
        try:
            async for p in run:
                results.append(p)
                yield self._noted(p)
        finally:  # also when our consumer stops early: stop the pipeline and the renderer now
            await run.aclose()
        if cache is not None:
            await cache.put(key, results)


    def _noted(self, page: PageResult) -> PageResult:
        """``page`` with the ``password_unused`` warning when it is the page that carries it (a copy:
        the cached entry holds the pages without it, since the password is not part of the key).
        """
        if page.index != self._password_note or PASSWORD_UNUSED in page.warnings:
            return page
        return replace(page, warnings=[*page.warnings, PASSWORD_UNUSED])


class OcrService:
    """Ties ingest, the :class:`gateway.types.PagePipeline` and the cache together (one per process)."""

    def __init__(self, config: GatewayConfig, pipeline: PagePipeline, cache: ResultCache | None = None,
                 render_timeout_s: float = 120.0):
        self.config, self.pipeline, self.cache, self.render_timeout_s = config, pipeline, cache, render_timeout_s

    def admit(self, request_id: str) -> RequestSlot:
        """The pipeline's admission (raises ResourceExhausted -> 429 when the gateway is full)."""
        return self.pipeline.admit(request_id)

    async def ready(self) -> tuple[bool, str]:
        """(ready, reason): ready when at least one encoder and one decoder replica are SERVING
        (:meth:`gateway.types.PagePipeline.ready`); never raises.
        """
        try:
            ok, reason = self.pipeline.ready()
            return bool(ok), str(reason) if not ok else ""
        except Exception as exc:  # noqa: BLE001 - readiness never raises
            return False, as_inkstream_error(exc).message

    async def check_serving(self) -> None:
        """Unavailable (503 + Retry-After) when the pipeline says no encoder or no decoder replica is
        SERVING, so a document is refused at once instead of every page waiting for a replica and
        coming back as an UNAVAILABLE page error.
        """
        ok, reason = await self.ready()
        if not ok:
            raise Unavailable(f"the gateway cannot read documents now ({reason}); retry shortly",
                              retry_after_s=NOT_SERVING_RETRY_AFTER_S)

    async def check_task(self, task: str) -> None:
        """InvalidInput (400) naming the decoder's tasks when ``task`` is not one of them (the
        pipeline's :meth:`gateway.types.PagePipeline.decoder_tasks`; when it knows none, the decoder
        rejects an unknown task per page: INVALID_ARGUMENT page errors).
        """
        if task:
            check_task_name(task.strip().lower(), await self.pipeline.decoder_tasks())

    async def check_options(self, request: OcrRequest) -> OcrRequest:
        """``request`` validated as far as it can be without its document, for the front ends to call
        before admission, so that a wrong request hears what is wrong (400) even while the gateway is
        full (429) — the error map, :mod:`inkstream.errors`, gives each its status.

        Checks the values (:meth:`OcrRequest.validated`), the page selection's syntax
        (:func:`gateway.ingest.selection.check_selection`; pages past the end need the document) and,
        while the pipeline is ready, the task and the mode against the replicas' Info (cached; when
        it is not ready they are left to :meth:`prepare`, which answers 503). Raises InvalidInput;
        returns the validated request. :meth:`prepare` checks all of it again.
        """
        request = request.validated(await self.pipeline.decoder_tasks())
        check_selection(request.pages)
        ok, _ = await self.ready()
        if ok:
            try:
                info = await self.pipeline.encoder_info()
            except InkstreamError:  # no Info now: prepare() checks the mode (or answers 503)
                return request
            info.mode(request.mode)
        return request

    async def prepare(self, upload: UploadedFile, request: OcrRequest, request_id: str = "") -> Prepared:
        """Validate options and open the document (once); raises 4xx InkstreamErrors with a message
        for a person, Unavailable (503) when no replica is SERVING or no encoder answers its Info.
        """
        request = request.validated(await self.pipeline.decoder_tasks())
        await self.check_serving()
        info = await self.pipeline.encoder_info()
        mode = info.mode(request.mode)
        limits = self.config.limits
        # pages are scaled to what the encoders take too (an image over the gateway's own limit is refused)
        fit = fit_pixels(info.max_image_pixels, limits.max_page_pixels)
        doc = await open_document(upload, long_side_px=mode.page_long_side_px, max_pixels=limits.max_page_pixels,
                                  max_pages=limits.max_pages, min_side=limits.min_page_side_px,
                                  password=request.password, max_image_bytes=info.max_image_bytes, fit_pixels=fit)
        try:
            indices = parse_pages(request.pages, doc.page_count, limits.max_pages)
        except BaseException:
            await close_document(doc)
            raise
        return Prepared(self, upload, request, doc, indices, info.model_id, mode.name, request_id, info.revision)
