"""HTTP plumbing of the REST API (no routes here): streaming upload reception with the size checks,
the error body, ASGI helpers that guarantee clean-up and the generic-500 mapping, and the OpenAPI
fragments for the upload body and the error responses. Used by :mod:`gateway.rest`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, AsyncIterator

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from inkstream.errors import Cancelled, InkstreamError, InvalidInput, as_inkstream_error, http_status, retry_after_header

from gateway.core import GatewayCore
from gateway.ingest import UploadedFile, UploadSink, too_large, upload_too_slow
from gateway.ingest.multipart import MultipartUpload, unknown_option
from gateway.service import OcrRequest
from gateway.stitch import PageResult

log = logging.getLogger("inkstream.gateway.rest")

OPTION_NAMES = ("format", "pages", "mode", "task", "password")
MULTIPART_SLACK = 64 * 1024  # bytes of multipart framing and text fields allowed on top of the file

UPLOAD_DOC = {
    "requestBody": {"required": True, "content": {
        "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
            "file": {"type": "string", "format": "binary",
                     "description": "PDF, PNG, JPEG, TIFF (multi-page), WebP, BMP or GIF (first frame)"},
            "format": {"type": "string", "enum": ["markdown", "text", "json"], "default": "markdown"},
            "pages": {"type": "string", "description": "1-based page selection, e.g. \"1-5,9\"; empty = all"},
            "mode": {"type": "string", "description": "encoder resolution mode; empty = the encoder's default"},
            "task": {"type": "string", "examples": ["ocr", "markdown"],
                     "description": "ocr = free OCR, markdown = layout with grounding boxes"},
            "password": {"type": "string", "description": "PDF user password"},
        }}},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
    }},
}


ERROR_SCHEMA = {"application/json": {"schema": {"type": "object", "properties": {"error": {
    "type": "object", "properties": {"code": {"type": "string", "description": "gRPC status code name"},
                                     "reason": {"type": "string", "description": "finer cause, e.g. PAYLOAD_TOO_LARGE, "
                                                "UNSUPPORTED_MEDIA_TYPE, NOTHING_TO_READ, UPLOAD_TIMEOUT (else = code)"},
                                     "message": {"type": "string", "description": "for a person"}}}}}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "invalid input (damaged file, bad or unknown option, bad page selection)", "content": ERROR_SCHEMA},
    405: {"description": "wrong HTTP method for this route", "content": ERROR_SCHEMA},
    408: {"description": "the upload did not finish within limits.upload_timeout_s", "content": ERROR_SCHEMA},
    413: {"description": "over a size / page / pixel limit", "content": ERROR_SCHEMA},
    415: {"description": "not a supported file type", "content": ERROR_SCHEMA},
    422: {"description": "nothing to read (no pages, image too small)", "content": ERROR_SCHEMA},
    429: {"description": "gateway full; retry after the Retry-After header", "content": ERROR_SCHEMA},
    503: {"description": "no replica available, or the gateway is draining", "content": ERROR_SCHEMA},
}


def error_response(exc: BaseException) -> JSONResponse:
    """``{"error": {"code", "reason", "message"}}`` with the mapped HTTP status and ``Retry-After`` when hinted."""
    err = as_inkstream_error(exc)
    return JSONResponse({"error": {"code": err.code_name, "reason": err.reason_name, "message": err.message}},
                        status_code=http_status(err), headers=retry_after_header(err))


class StreamWithCleanup(StreamingResponse):
    """StreamingResponse that always runs ``cleanup`` (closing the document, leaving admission,
    removing the temp dir), also when the client goes away before or during the stream."""

    def __init__(self, content: AsyncIterator[bytes], cleanup: contextlib.AsyncExitStack, **kw: Any):
        super().__init__(content, **kw)
        self._cleanup = cleanup

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._cleanup.aclose()


async def receive_upload(request: Request, core: GatewayCore, directory: Any) -> tuple[UploadedFile, OcrRequest]:
    """Stream the body into ``directory``; returns the upload and the options (form fields, then query).

    A declared ``Content-Length`` over the limit is refused (413) before any byte is read; otherwise
    the running count stops the upload at the limit. Multipart bodies: the ``file`` part is the
    document; any other body is the document itself. Form fields and query parameters other than
    ``file`` and :data:`OPTION_NAMES` are refused (InvalidInput). Raises InvalidInput / PayloadTooLarge, and
    DeadlineExceeded when the body takes longer than ``limits.upload_timeout_s`` (a slow client would
    otherwise hold its admission slot)."""
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
    opts = {k: fields.get(k, request.query_params.get(k, "")) for k in OPTION_NAMES}
    return upload, OcrRequest(**opts)


class CatchAll:
    """ASGI middleware: an unexpected exception becomes the mapped JSON error (500 INTERNAL, generic
    message, traceback logged) instead of Starlette's plain-text page, when no response has started."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
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
        except Exception as exc:  # noqa: BLE001
            if started:
                raise
            if not isinstance(exc, InkstreamError):
                log.exception("unhandled error in %s", scope.get("path"))
            await error_response(exc)(scope, receive, send)


async def collect_while_connected(request: Request, pages: AsyncIterator[PageResult],
                                   poll_s: float = 0.5) -> list[PageResult]:
    """All pages of a non-streaming request; stops the work (Cancelled) if the client disconnects,
    checked every ``poll_s`` seconds, so an abandoned long document does not keep replicas busy."""

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
    uploading, not only those already inside a handler."""

    def __init__(self, app: Any, core: GatewayCore):
        self.app = app
        self.core = core

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        with self.core.counted():
            await self.app(scope, receive, send)

