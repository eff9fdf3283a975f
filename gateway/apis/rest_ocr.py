"""``POST /v1/ocr`` (APIRouter): the synchronous OCR route, whole document or NDJSON per page.

NDJSON (``Accept: application/x-ndjson``): one ``{"page": {...}}`` line per page in page order as
soon as it is ready, then ``{"summary": {...}}`` (its ``document`` is empty for format=json: the
page lines are the JSON result). When pages stop because the stack failed (an error raised past
the pages, or the gateway's drain giving up on the stream when the stack is stopped), the last
line is ``{"error": {"code", "reason", "message", "retry_after_s"}}`` instead of the summary.
Headers ``X-Pages-Total``, ``X-Model-Id``, ``X-Inkstream-Cache``
(``hit`` when the pages came from the result cache, else ``miss``; also on the whole-document
answers, where the JSON result and the NDJSON summary carry it as ``"cached": true|false``).

A whole-document answer whose every page failed is the error a job of that document fails with
(:func:`inkstream.page_errors.every_page_failed`: e.g. 422 NOTHING_TO_READ, 503 UNAVAILABLE), not
a 200 holding only errors; an NDJSON stream has sent its status with the first page, so its page lines
and summary say it: ``pages_ok`` 0 and ``error``, the ``{code, reason, message}`` that answer and a
job of the document would have (null when a page was read).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.apis import rest_schema as schema
from gateway.apis.rest_http import (
    StreamWithCleanup,
    check_query_options,
    collect_while_connected,
    file_chunks,
    receive_upload,
)
from gateway.audit import audited
from gateway.core import GatewayCore
from gateway.output.searchable_pdf import write_searchable_pdf
from gateway.output.stitch import render_document
from gateway.service import run_id
from gateway.session import OcrSession
from inkstream.errors import InvalidInput, as_inkstream_error
from inkstream.page_errors import error_body, every_page_failed
from inkstream.page_result import PageResult, document_json
from inkstream.request_id import current_request_id

log = logging.getLogger("inkstream.gateway.rest")
NDJSON = "application/x-ndjson"
MEDIA = {"markdown": "text/markdown; charset=utf-8", "text": "text/plain; charset=utf-8", "json": "application/json",
         "hocr": "application/xhtml+xml; charset=utf-8", "pdf": "application/pdf"}


def cache_header(hit: bool) -> dict[str, str]:
    """``X-Inkstream-Cache: hit|miss``."""
    return {"X-Inkstream-Cache": "hit" if hit else "miss"}


def document_response(pages: list[PageResult], fmt: str, model_id: str, seconds: float,
                      headers: dict[str, str], cached: bool) -> Response:
    """The whole document in ``fmt`` (not pdf) with ``headers`` and the cache header."""
    headers = {**headers, **cache_header(cached)}
    if fmt == "json":
        return JSONResponse(document_json(pages, model_id, seconds, cached), headers=headers)
    return Response(render_document(pages, fmt, model_id), media_type=MEDIA[fmt], headers=headers)


def _summary(pages: list[PageResult], model_id: str, fmt: str, seconds: float, cached: bool) -> dict[str, Any]:
    return {"model_id": model_id, "pages": len(pages), "pages_ok": sum(p.status == "ok" for p in pages),
            "pages_error": sum(p.status != "ok" for p in pages), "seconds": round(seconds, 3), "cached": cached,
            "document": "" if fmt == "json" else render_document(pages, fmt, model_id), "error": error_body(pages)}


def error_line(exc: BaseException) -> bytes:
    """The NDJSON line ``{"error": {code, reason, message, retry_after_s}}`` that ends a stream whose
    pages stopped because of ``exc`` (the status line is long gone, so the error travels in the body).
    """
    e = as_inkstream_error(exc)
    body = {"code": e.code_name, "reason": e.reason_name, "message": e.message, "retry_after_s": e.retry_after_s}
    return (json.dumps({"error": body}, ensure_ascii=False) + "\n").encode()


async def _ndjson(first: PageResult | None, session: OcrSession) -> AsyncIterator[bytes]:
    assert session.prepared is not None
    pages: list[PageResult] = []
    nxt = first
    while nxt is not None:
        pages.append(nxt)
        yield (json.dumps({"page": nxt.to_dict()}, ensure_ascii=False) + "\n").encode()
        try:
            nxt = await session.next_page()
        except Exception as exc:  # noqa: BLE001 - the stack failed mid-stream: the last line says so
            log.warning("stream stopped after %d page(s): %s", len(pages), as_inkstream_error(exc).reason_name)
            yield error_line(exc)
            return
    prepared = session.prepared
    summary = _summary(pages, prepared.model_id, prepared.request.format, time.monotonic() - session.started,
                       prepared.cache_hit)
    yield (json.dumps({"summary": summary}, ensure_ascii=False) + "\n").encode()


def _pdf_not_streamed() -> InvalidInput:
    return InvalidInput(f"format=pdf is one binary document: ask without 'Accept: {NDJSON}', or submit a job")


def ocr_router(core: GatewayCore) -> APIRouter:
    """The router of ``POST /v1/ocr`` over ``core``."""
    router = APIRouter()

    @router.post("/v1/ocr", **schema.OCR_ROUTE)
    async def ocr(request: Request) -> Response:
        """OCR a document: multipart field ``file`` (or ``source=s3://...``) plus options ``format``,
        ``pages``, ``mode``, ``task``, ``password``. Returns the whole document, or with ``Accept:
        application/x-ndjson`` one JSON line per page as soon as it is ready, then a summary line.
        """
        with audited("ocr"):  # a synchronous read (of an upload or a source object) is audited too
            request_id = run_id(current_request_id(), "x-request-id" in request.headers)
            stack = contextlib.AsyncExitStack()
            ndjson = NDJSON in request.headers.get("accept", "")

            async def check() -> None:  # the query's options, before admission (a wrong request hears so)
                if (await check_query_options(request, core)).format == "pdf" and ndjson:
                    raise _pdf_not_streamed()

            try:
                session = await stack.enter_async_context(OcrSession(core, request_id, api="rest", route="/v1/ocr",
                                                                     check=check))
                got = await receive_upload(request, core, session.tmp)
                prepared = await session.prepare(got.upload, got.options)
                fmt, headers = prepared.request.format, {"X-Model-Id": prepared.model_id}
                if ndjson:
                    if fmt == "pdf":
                        raise _pdf_not_streamed()
                    first = await anext(session.pages(), None)  # early pipeline errors still get their status
                    headers.update({"X-Pages-Total": str(prepared.page_count), **cache_header(prepared.cache_hit)})
                    return StreamWithCleanup(_ndjson(first, session), stack, media_type=NDJSON,
                                             headers=headers)
                pages = await collect_while_connected(request, session.pages(), core)
                if (failed := every_page_failed(pages)) is not None:
                    raise failed  # nothing read: the status a job of this document fails with
                if fmt == "pdf":
                    out = session.tmp / "searchable.pdf"
                    await asyncio.to_thread(write_searchable_pdf, pages, got.upload.path, prepared.doc.kind, out,
                                            password=prepared.request.password)
                    return StreamWithCleanup(file_chunks(out), stack, media_type=MEDIA["pdf"],
                                             headers={**headers, **cache_header(prepared.cache_hit),
                                                      "Content-Disposition": 'inline; filename="searchable.pdf"'})
                response = document_response(pages, fmt, prepared.model_id, time.monotonic() - session.started,
                                             headers, prepared.cache_hit)
                await stack.aclose()
                return response
            except BaseException as exc:
                await stack.__aexit__(type(exc), exc, exc.__traceback__)
                raise

    return router
