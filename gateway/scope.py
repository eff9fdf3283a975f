"""One request's resources, owned from its admission to its end: the request-scoped object that the
synchronous front ends (:class:`gateway.session.OcrSession`) and the job worker
(:class:`gateway.jobs.run.JobRun`) are both built on, so the sequence — admission, folders, the
document opened once, its pages, clean-up in reverse order — is written once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import TypeVar

from gateway.ingest import UploadedFile
from gateway.service import OcrRequest, OcrService, Prepared
from inkstream.errors import ResourceExhausted
from inkstream.fair import INTERACTIVE
from inkstream.page_result import PageResult

T = TypeVar("T")


class RequestScope:
    """The resources of one request, held from its admission to its end and released together, in
    reverse order, by :meth:`close` (also on an error or when the consumer goes away): the
    admission slot (:meth:`admit`), folders or files (:meth:`hold`), the opened document
    (:meth:`prepare`, once) and its page stream (:meth:`pages`, once). ``request_id``: the admission
    key and the id in logs and traces.
    """

    def __init__(self, service: OcrService, request_id: str):
        self.service, self.request_id = service, request_id
        self.prepared: Prepared | None = None
        self._stack = contextlib.AsyncExitStack()
        self._pages: AsyncGenerator[PageResult, None] | None = None

    async def __aenter__(self) -> RequestScope:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def admit(self, wait: bool = False) -> None:
        """Take the request's slot in the gateway's page bound: ResourceExhausted (429) when the
        gateway is full, or with ``wait`` try again after its Retry-After (1 s when it names none).
        """
        while True:
            try:
                await self._stack.enter_async_context(self.service.admit(self.request_id))
                return
            except ResourceExhausted as exc:
                if not wait:
                    raise
                await asyncio.sleep(exc.retry_after_s or 1.0)

    def hold(self, resource: contextlib.AbstractContextManager[T]) -> T:
        """Enter ``resource`` (e.g. a temp dir) now and exit it at :meth:`close`."""
        return self._stack.enter_context(resource)

    async def prepare(self, upload: UploadedFile, request: OcrRequest) -> Prepared:
        """:meth:`OcrService.prepare` (the document is opened here, closed at :meth:`close`)."""
        if self.prepared is not None:
            raise RuntimeError("RequestScope.prepare() called twice: a request opens its document once")
        self.prepared = await self._stack.enter_async_context(
            await self.service.prepare(upload, request, self.request_id))
        return self.prepared

    def pages(self, deadline_s: float | None, priority: int = INTERACTIVE) -> AsyncGenerator[PageResult, None]:
        """:meth:`Prepared.pages` of the prepared document (the same stream on every call)."""
        if self.prepared is None:
            raise RuntimeError("RequestScope.pages() before prepare()")
        if self._pages is None:
            self._pages = self.prepared.pages(deadline_s, priority)
            self._stack.push_async_callback(self._pages.aclose)
        return self._pages

    async def close(self) -> None:
        """Release everything (idempotent): pages stopped, document closed, slot returned, folders removed."""
        await self._stack.aclose()
