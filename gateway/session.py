"""One synchronous OCR request, start to end, the same for every front end (REST, gRPC, OpenAI).

The sequence each front end used to repeat: refuse while draining -> check the options known before
the body (the front end's ``check``: 4xx here, so a wrong request is told so even when the gateway is
full) -> take an admission ticket
(429 / RESOURCE_EXHAUSTED when the gateway is full) -> a request-scoped temp dir -> receive the
document into it -> prepare (options, type, limits, page selection: 4xx here, before any output) ->
page results in page order -> metrics -> clean-up (document closed, ticket returned, temp dir
removed), also when the client goes away mid-answer. Front ends only convert their messages.

Usage::

    async with OcrSession(core, request_id, api="rest", route="/v1/ocr") as s:
        upload = s.spool(data)                      # or receive into s.tmp and pass the UploadedFile
        prepared = await s.prepare(upload, OcrRequest(format="text"))
        async for page in s.pages():
            ...

Metrics: ``inkstream.gateway.requests`` (api, route, status: the HTTP status of the outcome),
``inkstream.gateway.pages`` (status, finish_reason) and ``inkstream.gateway.request.duration``
(seconds), recorded once when the session closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gateway.ingest.upload import UploadedFile, UploadSink
from gateway.scope import RequestScope
from gateway.service import OcrRequest, Prepared
from inkstream.errors import PasswordRequired, Unavailable, http_status, password_required
from inkstream.page_result import PageResult

if TYPE_CHECKING:
    from gateway.core import GatewayCore


SHUTDOWN_MESSAGE = "the gateway shut down before the document was read; send it again (another replica answers)"


class OcrSession:
    """A request-scoped owner of one OCR request's resources (see the module docstring), built on
    :class:`gateway.scope.RequestScope` (as the job worker is) with the front ends' parts: the
    drain check, a temp dir and the request metrics.

    ``request_id``: the admission key and the id in logs and traces; ``api`` / ``route``: metric
    labels; ``check``: awaited before admission (the options a front end has before it reads the
    body, e.g. :meth:`gateway.service.OcrService.check_options`; admission runs before the body is
    read: a full gateway refuses before the upload). Raises what ``check``,
    admission and :meth:`prepare` raise (InkstreamErrors with their status).
    """

    def __init__(self, core: GatewayCore, request_id: str, *, api: str, route: str,
                 check: Callable[[], Awaitable[object]] | None = None):
        self.core, self.request_id, self.api, self.route = core, request_id, api, route
        self._check = check
        self.started = time.monotonic()
        self.scope = RequestScope(core.service, request_id)
        self.tmp: pathlib.Path = pathlib.Path()
        self.status = "200"
        self._counted: AsyncGenerator[PageResult, None] | None = None
        self._closed = False

    async def __aenter__(self) -> OcrSession:
        try:
            self.core.check_accepting()
            if self._check is not None:
                await self._check()
            await self.scope.admit()
            self.tmp = self.scope.hold(self.core.request_dir())
        except BaseException as exc:
            await self._close(exc)
            raise
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        await self._close(exc)

    @property
    def prepared(self) -> Prepared | None:
        """The prepared request (None before :meth:`prepare`)."""
        return self.scope.prepared

    def spool(self, data: bytes, name: str = "document") -> UploadedFile:
        """Write ``data`` (a whole document, bytes) into the temp dir with the upload size limit;
        raises PayloadTooLarge (413) over ``limits.max_upload_bytes``.
        """
        sink = UploadSink(self.tmp, self.core.config.limits.max_upload_bytes, name=name)
        sink.write(data)
        return sink.finish()

    async def prepare(self, upload: UploadedFile, request: OcrRequest) -> Prepared:
        """Validate ``request`` and open ``upload`` (4xx InkstreamErrors here, before any output; a PDF
        sent without its password: PasswordRequired naming this session's API's option).
        """
        try:
            return await self.scope.prepare(upload, request)
        except PasswordRequired:
            raise password_required(self.api) from None

    def pages(self) -> AsyncGenerator[PageResult, None]:
        """The page results in page order, each selected page exactly once (once per session)."""
        if self._counted is None:
            self._counted = self._count(self.scope.pages(self.core.config.request_timeout_s))
        return self._counted

    async def _count(self, pages: AsyncGenerator[PageResult, None]) -> AsyncGenerator[PageResult, None]:
        async for page in pages:
            self.core.metrics.pages.add(1, {"status": page.status, "finish_reason": page.finish_reason})
            for code in page.warnings:
                self.core.metrics.page_warnings.add(1, {"code": code})
            yield page

    async def next_page(self) -> PageResult | None:
        """The next of :meth:`pages`, or None at the end. Raises what the pages raise, and
        Unavailable (:data:`SHUTDOWN_MESSAGE`) when the gateway's drain gives up on this request while
        it waits (``core.abandoned``), so a stream ends with an error line / status, not cut short.
        """
        me = asyncio.current_task()
        assert me is not None
        fired = False

        def fire(_: Any) -> None:
            nonlocal fired
            fired = True
            me.cancel()

        watcher = asyncio.ensure_future(self.core.abandoned.wait())
        watcher.add_done_callback(fire)
        try:
            return await anext(self.pages(), None)
        except asyncio.CancelledError:
            if fired and me.uncancel() == 0:
                raise Unavailable(SHUTDOWN_MESSAGE, retry_after_s=1.0) from None
            raise
        finally:
            watcher.remove_done_callback(fire)
            watcher.cancel()

    @property
    def cache_hit(self) -> bool:
        """Whether the pages came from the result cache."""
        return self.prepared is not None and self.prepared.cache_hit

    async def close(self) -> None:
        """Release everything (idempotent); what ``async with`` does at exit."""
        await self._close(None)

    async def _close(self, exc: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._counted is not None:
                await self._counted.aclose()
            await self.scope.close()
        finally:
            if isinstance(exc, Exception):
                self.status = str(http_status(exc))
            if exc is None or isinstance(exc, Exception):
                m = self.core.metrics
                m.requests.add(1, {"api": self.api, "route": self.route, "status": self.status})
                m.duration.record(time.monotonic() - self.started)


@contextlib.asynccontextmanager
async def ocr_bytes(core: GatewayCore, request_id: str, data: bytes, request: OcrRequest, *, api: str,
                    route: str) -> AsyncIterator[OcrSession]:
    """An :class:`OcrSession` for a document given as bytes, prepared with ``request``."""
    async with OcrSession(core, request_id, api=api, route=route) as session:
        await session.prepare(session.spool(data), request)
        yield session
