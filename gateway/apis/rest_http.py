"""HTTP plumbing of the REST API (no routes here): streaming upload reception with the size checks,
the error body, and ASGI helpers that guarantee clean-up and the generic-500 mapping. Used by
:mod:`gateway.apis.rest`; its OpenAPI description is :mod:`gateway.apis.rest_schema`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.requests import ClientDisconnect

from gateway import tenancy
from gateway.core import GatewayCore
from gateway.ingest import UploadedFile, UploadSink, too_large, upload_too_slow
from gateway.ingest.multipart import MultipartUpload, document_sent_as_form, given_twice, unknown_option
from gateway.service import OcrRequest
from inkstream.doc_types import SNIFF_BYTES
from inkstream.errors import (
    Cancelled,
    InkstreamError,
    InvalidInput,
    as_inkstream_error,
    http_status,
    retry_after_header,
)
from inkstream.page_result import PageResult

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


@dataclass
class Received:
    """A received request: the document (``upload``, on local disk), its options, and the other
    fields: ``source`` (``s3://`` URI the document was read from, "" when it was in the body) and
    ``callback_url`` ("" when not given).
    """

    upload: UploadedFile
    options: OcrRequest
    source: str = ""
    callback_url: str = ""


NO_DOCUMENT = ("no document in the request: send it as the multipart field 'file' (curl -F file=@doc.pdf), "
               "as the raw body (curl --data-binary @doc.pdf -H 'Content-Type: application/octet-stream'), "
               "or name an uploaded object with source=s3://BUCKET/KEY (POST /v1/uploads gives one)")


def check_query_names(request: Request, known: tuple[str, ...]) -> None:
    """InvalidInput (400) for a query parameter not in ``known`` or given twice with different values."""
    for name in request.query_params:
        if name not in known:
            raise InvalidInput(unknown_option(name, known, "query parameter"))
        values = request.query_params.getlist(name)
        if len(set(values)) > 1:
            raise InvalidInput(given_twice(name, values[0], next(v for v in values if v != values[0]),
                                           "query parameter"))


async def check_query_options(request: Request, core: GatewayCore,
                              extra_fields: tuple[str, ...] = ("source",)) -> OcrRequest:
    """The options of the query string, checked before admission (and before the body is read):
    the names (:func:`check_query_names`) and the values
    (:meth:`gateway.service.OcrService.check_options`; an option not in the query is checked at its
    default here, and again with the form fields once the body is read). Returns the validated
    request of the query alone; raises InvalidInput (400).
    """
    check_query_names(request, OPTION_NAMES + extra_fields)
    query: dict[str, Any] = {name: request.query_params.get(name, "") for name in OPTION_NAMES}
    return await core.service.check_options(OcrRequest(**query))


async def receive_upload(request: Request, core: GatewayCore, directory: Any,
                         extra_fields: tuple[str, ...] = ("source",)) -> Received:
    """Stream the body into ``directory``; returns the upload and the options (form fields, then query).

    A declared ``Content-Length`` over the limit is refused (413) before any byte is read; otherwise
    the running count stops the upload at the limit. Multipart bodies: the ``file`` part is the
    document; any other body is the document itself. ``source=s3://BUCKET/KEY`` (a field in
    ``extra_fields``) instead of a file: the object is streamed from the object store with the same
    limits (:class:`gateway.jobs.sources.Sources`). Form fields and query parameters other than ``file``,
    :data:`OPTION_NAMES` and ``extra_fields`` are refused (InvalidInput). Raises InvalidInput /
    PayloadTooLarge, and DeadlineExceeded when the body takes longer than ``limits.upload_timeout_s``
    (a slow client would otherwise hold its admission slot).
    """
    limits = core.config.limits
    known = OPTION_NAMES + extra_fields
    check_query_names(request, known)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_upload_bytes + MULTIPART_SLACK:
        raise too_large(limits.max_upload_bytes, int(declared))
    ctype = request.headers.get("content-type", "")
    if ctype.startswith("application/x-www-form-urlencoded"):  # fields only (source=...), no document body
        return await _form_fields(request, core, directory, known)
    sink = UploadSink(directory, limits.max_upload_bytes)
    form = None
    if ctype.startswith("multipart/form-data"):
        form = MultipartUpload(ctype, sink, limits.max_form_field_bytes, known_fields=known)
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
    except ClientDisconnect:
        sink.abort()
        raise client_gone(core, request, "upload", sink.size) from None
    except BaseException:
        sink.abort()
        raise
    upload = sink.finish()
    if form is None:
        return await _received(request, core, directory, upload, {}, known)
    return await _received(request, core, directory, upload, form.fields, known, has_document=form.has_file)


async def _form_fields(request: Request, core: GatewayCore, directory: Any, known: tuple[str, ...]) -> Received:
    """An ``application/x-www-form-urlencoded`` body: options and ``source``, at most
    ``limits.max_form_field_bytes`` x the number of known fields; any other name is refused.
    """
    cap = core.config.limits.max_form_field_bytes * len(known)
    body = bytearray()
    sniffed = False
    try:
        async for chunk in request.stream():
            body += chunk
            if not sniffed and len(body) >= SNIFF_BYTES:
                _refuse_a_document(body)
                sniffed = True
            if len(body) > cap:
                raise InvalidInput(f"the form body is larger than {cap} bytes; send the document as multipart 'file'")
    except ClientDisconnect:
        raise client_gone(core, request, "upload", len(body)) from None
    if not sniffed:
        _refuse_a_document(body)
    fields: dict[str, str] = {}
    for name, value in urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
        if name not in known:
            raise InvalidInput(unknown_option(name, known, "form field"))
        if fields.get(name, value) != value:
            raise InvalidInput(given_twice(name, fields[name], value, "form field"))
        fields[name] = value
    empty = UploadSink(directory, core.config.limits.max_upload_bytes).finish()
    return await _received(request, core, directory, empty, fields, known, has_document=False)


def _refuse_a_document(body: bytearray) -> None:
    """Raise InvalidInput naming the right Content-Type when ``body`` (a form body) starts as a
    document does: parsed as form fields, its bytes would come back as an "unknown form field".
    """
    message = document_sent_as_form(bytes(body[:SNIFF_BYTES]))
    if message is not None:
        raise InvalidInput(message)


async def _received(request: Request, core: GatewayCore, directory: Any, upload: UploadedFile,
                    fields: dict[str, str], known: tuple[str, ...], has_document: bool = True) -> Received:
    """Options from ``fields`` then the query; a ``source`` object is fetched into ``directory``.
    ``has_document``: the body held a document (a raw body, or a multipart ``file`` part, even empty);
    a form without one and without ``source`` (field or query) raises InvalidInput naming the three ways.
    """
    limits = core.config.limits
    for k in known:
        if k in fields and k in request.query_params and fields[k] != request.query_params[k]:
            raise InvalidInput(f"option {k!r} given as a form field ({fields[k]!r}) and as a query parameter "
                               f"({request.query_params[k]!r}) with different values; give it once")
    values: dict[str, Any] = {k: fields.get(k, request.query_params.get(k, "")) for k in known}
    source = values.pop("source", "").strip()
    callback = values.pop("callback_url", "").strip()
    if not source and not has_document:
        raise InvalidInput(NO_DOCUMENT)
    if source:
        if upload.size:
            raise InvalidInput("send the document either in 'file' / the body or as source=s3://..., not both")
        upload = await core.sources.fetch(source, pathlib.Path(directory), limits.max_upload_bytes,
                                          tenancy.current().tenant)
    core.metrics.upload_bytes.add(upload.size)
    return Received(upload, OcrRequest(**values), source, callback)


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


def client_gone(core: GatewayCore, request: Request, phase: str, received_bytes: int = 0) -> Cancelled:
    """The client closed its connection (``phase``: "upload" or "answer"): an info line and the
    ``inkstream.gateway.client_disconnects`` counter, not an ERROR with a traceback (a client giving
    up is not a gateway fault); returns the Cancelled (499) error that ends the request.
    """
    log.info("client went away during the %s of %s %s (%d bytes received)", phase, request.method,
             request.url.path, received_bytes)
    core.metrics.client_disconnects.add(1, {"phase": phase})
    return Cancelled(f"the client disconnected during the {phase}")


async def collect_while_connected(request: Request, pages: AsyncIterator[PageResult], core: GatewayCore,
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
                raise client_gone(core, request, "answer")
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

