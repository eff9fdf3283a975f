"""HTTP plumbing of the REST API (no routes here): streaming upload reception with the size checks,
the error body, and ASGI helpers that guarantee clean-up and the generic-500 mapping. Used by
:mod:`gateway.rest`; its OpenAPI description is :mod:`gateway.rest_schema`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from gateway.core import GatewayCore
from gateway.ingest import UploadedFile, UploadSink, too_large, upload_too_slow
from gateway.ingest.multipart import MultipartUpload, unknown_option
from gateway.service import OcrRequest
from gateway.stitch import PageResult
from inkstream.errors import (
    Cancelled,
    InkstreamError,
    InvalidInput,
    as_inkstream_error,
    http_status,
    retry_after_header,
)

log = logging.getLogger("inkstream.gateway.rest")

OPTION_NAMES = ("format", "pages", "mode", "task", "password")
MULTIPART_SLACK = 64 * 1024  # bytes of multipart framing and text fields allowed on top of the file


def error_response(exc: BaseException) -> JSONResponse:
    """``{"error": {"code", "reason", "message"}}`` with the mapped HTTP status and ``Retry-After`` when hinted."""
    err = as_inkstream_error(exc)
    return JSONResponse({"error": {"code": err.code_name, "reason": err.reason_name, "message": err.message}},
                        status_code=http_status(err), headers=retry_after_header(err))


class StreamWithCleanup(StreamingResponse):
    """StreamingResponse that always runs ``cleanup`` (closing the document, leaving admission,
    removing the temp dir), also when the client goes away before or during the stream.
    """

    def __init__(self, content: AsyncIterator[bytes], cleanup: contextlib.AsyncExitStack, **kw: Any):
        super().__init__(content, **kw)
        self._cleanup = cleanup

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Send the response, then run ``cleanup`` (whether or not the stream completed)."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._cleanup.aclose()


async def file_chunks(path: pathlib.Path, chunk_bytes: int = 1 << 20) -> AsyncIterator[bytes]:
    """The bytes of ``path`` in chunks of ``chunk_bytes`` (a large output file is never held whole)."""
    with open(path, "rb") as f:
        while chunk := await asyncio.to_thread(f.read, chunk_bytes):
            yield chunk


async def receive_upload(request: Request, core: GatewayCore, directory: Any) -> tuple[UploadedFile, OcrRequest]:
    """Stream the body into ``directory``; returns the upload and the options (form fields, then query).

    A declared ``Content-Length`` over the limit is refused (413) before any byte is read; otherwise
    the running count stops the upload at the limit. Multipart bodies: the ``file`` part is the
    document; any other body is the document itself. Form fields and query parameters other than
    ``file`` and :data:`OPTION_NAMES` are refused (InvalidInput). Raises InvalidInput / PayloadTooLarge, and
    DeadlineExceeded when the body takes longer than ``limits.upload_timeout_s`` (a slow client would
    otherwise hold its admission slot).
    """
    limits = core.config.limits
    for name in request.query_params:
        if name not in OPTION_NAMES:
            raise InvalidInput(unknown_option(name, OPTION_NAMES, "query parameter"))
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_upload_bytes + MULTIPART_SLACK:
        raise too_large(limits.max_upload_bytes, int(declared))
    sink = UploadSink(directory, limits.max_upload_bytes)
    ctype = request.headers.get("content-type", "")
    form = None
    if ctype.startswith("multipart/form-data"):
        form = MultipartUpload(ctype, sink, limits.max_form_field_bytes, known_fields=OPTION_NAMES)
    try:
        async with asyncio.timeout(limits.upload_timeout_s):
            async for chunk in request.stream():
                if form is not None:
                    form.write(chunk)
                else:
                    sink.write(chunk)
        if form is not None:
            form.close()
    except TimeoutError:
        sink.abort()
        raise upload_too_slow(limits.upload_timeout_s) from None
    except BaseException:
        sink.abort()
        raise
    upload = sink.finish()
    core.metrics.upload_bytes.add(upload.size)
    fields = form.fields if form is not None else {}
    opts: dict[str, Any] = {k: fields.get(k, request.query_params.get(k, "")) for k in OPTION_NAMES}
    return upload, OcrRequest(**opts)


class CatchAll:
    """ASGI middleware: an unexpected exception becomes the mapped JSON error (500 INTERNAL, generic
    message, traceback logged) instead of Starlette's plain-text page, when no response has started.
    """

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """ASGI entry point: run the app; an exception before the response started becomes a 500 answer."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def _send(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, _send)
        except Exception as exc:
            if started:
                raise
            if not isinstance(exc, InkstreamError):
                log.exception("unhandled error in %s", scope.get("path"))
            await error_response(exc)(scope, receive, send)


async def collect_while_connected(request: Request, pages: AsyncIterator[PageResult],
                                   poll_s: float = 0.5) -> list[PageResult]:
    """All pages of a non-streaming request; stops the work (Cancelled) if the client disconnects,
    checked every ``poll_s`` seconds, so an abandoned long document does not keep replicas busy.
    """

    async def collect() -> list[PageResult]:
        """Drain ``pages`` into a list."""
        return [p async for p in pages]

    task = asyncio.ensure_future(collect())
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=poll_s)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise Cancelled("the client disconnected before the document was finished")
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


class InflightMiddleware:
    """ASGI middleware counting every ``/v1/`` request from the moment its headers arrive until its
    response is sent (:meth:`GatewayCore.counted`), so a drain also waits for requests still
    uploading, not only those already inside a handler.
    """

    def __init__(self, app: Any, core: GatewayCore):
        self.app = app
        self.core = core

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """ASGI entry point: ``/v1/`` requests are counted in flight until their response is sent."""
        if scope["type"] != "http" or not scope.get("path", "").startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        with self.core.counted():
            await self.app(scope, receive, send)

