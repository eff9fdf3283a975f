"""REST API (FastAPI): ``POST /v1/ocr``, jobs, health, readiness, metrics. OpenAPI at ``/openapi.json``.

Handlers convert HTTP to :class:`gateway.service.OcrRequest` / uploads and back; the work is in
:mod:`gateway.service` and :mod:`gateway.jobs`. Errors are mapped by :mod:`inkstream.errors` only
(``{"error": {"code", "reason", "message"}}`` with the mapped status and ``Retry-After`` when hinted).

NDJSON (``Accept: application/x-ndjson``): one ``{"page": {...}}`` line per page in page order as
soon as it is ready, then ``{"summary": {...}}`` (its ``document`` is empty for format=json: the
page lines are the JSON result). Headers ``X-Pages-Total``, ``X-Model-Id``, ``X-Inkstream-Cache``
(``hit`` when the pages came from the result cache, else ``miss``; also on the whole-document
answers, where the JSON result and the NDJSON summary carry it as ``"cached": true|false``).

Uploads: ``multipart/form-data`` with the document in the ``file`` field and options as form fields
(or query parameters), or the raw document as the body with options as query parameters; any other
form field or query parameter is refused (400), so a misspelt option is not silently ignored.
Unknown routes (404) and wrong methods (405) answer in the same error shape. The
declared ``Content-Length`` is checked before anything is read; the body is then streamed to a
request-scoped temp file with a running byte count (413 as soon as it passes the limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway import rest_schema as schema
from gateway.auth import ApiKeyMiddleware, ApiKeys
from gateway.config import GatewayConfig
from gateway.core import GatewayCore
from gateway.openai_api import openai_router
from gateway.render.searchable_pdf import write_searchable_pdf
from gateway.rest_http import (
    CatchAll,
    InflightMiddleware,
    StreamWithCleanup,
    collect_while_connected,
    error_response,
    file_chunks,
    receive_upload,
)
from gateway.service import OcrRequest, run_id
from gateway.session import OcrSession
from gateway.stitch import PageResult, document_json, render_document
from gateway.stores import JobRecord
from gateway.types import PagePipeline
from inkstream import trace_interceptors
from inkstream.errors import (
    FailedPrecondition,
    InkstreamError,
    InvalidInput,
    JobCancelled,
    MethodNotAllowed,
    NotFound,
    Unauthenticated,
    error_for_code,
)
from inkstream.request_id import current_request_id

NDJSON = "application/x-ndjson"
MEDIA = {"markdown": "text/markdown; charset=utf-8", "text": "text/plain; charset=utf-8", "json": "application/json",
         "hocr": "application/xhtml+xml; charset=utf-8", "pdf": "application/pdf"}


def _job_json(job: JobRecord) -> dict[str, Any]:
    return {"job_id": job.job_id, "status": job.status, "pages_done": job.pages_done,
            "pages_total": job.pages_total, "error": job.error, "model_id": job.model_id,
            "options": job.options, "created_at": job.created_at, "updated_at": job.updated_at}


def _cache_header(hit: bool) -> dict[str, str]:
    return {"X-Inkstream-Cache": "hit" if hit else "miss"}


def _document_response(pages: list[PageResult], fmt: str, model_id: str, seconds: float,
                       headers: dict[str, str], cached: bool) -> Response:
    headers = {**headers, **_cache_header(cached)}
    if fmt == "json":
        return JSONResponse(document_json(pages, model_id, seconds, cached), headers=headers)
    return Response(render_document(pages, fmt), media_type=MEDIA[fmt], headers=headers)


def _summary(pages: list[PageResult], model_id: str, fmt: str, seconds: float, cached: bool) -> dict[str, Any]:
    return {"model_id": model_id, "pages": len(pages), "pages_ok": sum(p.status == "ok" for p in pages),
            "pages_error": sum(p.status != "ok" for p in pages), "seconds": round(seconds, 3), "cached": cached,
            "document": "" if fmt == "json" else render_document(pages, fmt)}


def create_app(config: GatewayConfig, pipeline: PagePipeline, core: GatewayCore | None = None,
               api_keys: ApiKeys | None = None) -> FastAPI:
    """The REST application. ``pipeline``: any :class:`gateway.types.PagePipeline` (tests inject a
    fake). ``core``: share one :class:`GatewayCore` with the gRPC server; when None the app creates
    its own and closes it on shutdown. The core is at ``app.state.core``. ``api_keys``: when given,
    every route but the probes and /metrics needs a key (:mod:`gateway.auth`).
    """
    own_core = core is None
    core = core or GatewayCore(config, pipeline)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        """Recover the job store at start-up; close an owned core at shutdown."""
        core.start()
        yield
        if own_core:
            await core.close()

    app = FastAPI(title="inkstream gateway", version="1", lifespan=lifespan,
                  description="OCR of PDFs and images with an optical-compression vision-language model.")
    app.state.core = core

    @app.exception_handler(InkstreamError)
    async def _inkstream_error(_: Request, exc: InkstreamError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _route_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Unknown routes and wrong methods answer in the same error shape as everything else."""
        what = f"{request.method} {request.url.path}"
        if exc.status_code == 405:
            resp = error_response(
                MethodNotAllowed(f"{what}: this route does not take {request.method} (see /openapi.json)"))
        elif exc.status_code == 404:
            resp = error_response(NotFound(f"{what}: no such route (the API is described at /docs and /openapi.json)"))
        elif exc.status_code == 401:
            resp = error_response(Unauthenticated(f"{what}: {exc.detail}"))
        else:
            resp = error_response(InvalidInput(f"{what}: {exc.detail}"))
            resp.status_code = exc.status_code
        for k, v in (exc.headers or {}).items():
            resp.headers[k] = v
        return resp

    @app.exception_handler(RequestValidationError)
    async def _params_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(x) for x in e.get('loc', ()))}: {e.get('msg', '')}" for e in exc.errors())
        return error_response(InvalidInput(f"{request.method} {request.url.path}: {problems}"))

    app.add_middleware(CatchAll)
    app.add_middleware(InflightMiddleware, core=core)
    app.add_middleware(trace_interceptors.asgi_middleware)  # X-Request-Id, SERVER span attributes
    if api_keys is not None:
        app.add_middleware(ApiKeyMiddleware, keys=api_keys)

    @app.post("/v1/ocr", **schema.OCR_ROUTE)
    async def ocr(request: Request) -> Response:
        """OCR a document: multipart field ``file`` (PDF, PNG, JPEG, TIFF, WebP, BMP, GIF) plus options
        ``format``, ``pages``, ``mode``, ``task``, ``password``. Returns the whole document
        (text/markdown, text/plain or JSON), or with ``Accept: application/x-ndjson`` one JSON line per
        page as soon as it is ready, in page order, then a summary line.
        """
        request_id = run_id(current_request_id(), "x-request-id" in request.headers)
        stack = contextlib.AsyncExitStack()
        try:
            session = await stack.enter_async_context(OcrSession(core, request_id, api="rest", route="/v1/ocr"))
            upload, opts = await receive_upload(request, core, session.tmp)
            prepared = await session.prepare(upload, opts)
            fmt = prepared.request.format
            headers = {"X-Model-Id": prepared.model_id}
            if NDJSON in request.headers.get("accept", ""):
                if fmt == "pdf":
                    raise InvalidInput("format=pdf is one binary document: ask without 'Accept: "
                                       f"{NDJSON}', or submit a job")
                first = await anext(session.pages(), None)  # early pipeline errors still get their status
                headers.update({"X-Pages-Total": str(prepared.page_count), **_cache_header(prepared.cache_hit)})
                return StreamWithCleanup(_ndjson(first, session), stack, media_type=NDJSON, headers=headers)
            pages = await collect_while_connected(request, session.pages())
            if fmt == "pdf":
                out = session.tmp / "searchable.pdf"
                await asyncio.to_thread(write_searchable_pdf, pages, upload.path, prepared.doc.kind, out,
                                        password=prepared.request.password)
                return StreamWithCleanup(file_chunks(out), stack, media_type=MEDIA["pdf"],
                                         headers={**headers, **_cache_header(prepared.cache_hit),
                                                  "Content-Disposition": 'inline; filename="searchable.pdf"'})
            seconds = time.monotonic() - session.started
            response = _document_response(pages, fmt, prepared.model_id, seconds, headers, prepared.cache_hit)
            await stack.aclose()
            return response
        except BaseException as exc:
            await stack.__aexit__(type(exc), exc, exc.__traceback__)
            raise

    async def _ndjson(first: PageResult | None, session: OcrSession) -> AsyncIterator[bytes]:
        assert session.prepared is not None
        pages: list[PageResult] = []
        nxt = first
        while nxt is not None:
            pages.append(nxt)
            yield (json.dumps({"page": nxt.to_dict()}, ensure_ascii=False) + "\n").encode()
            nxt = await anext(session.pages(), None)
        prepared = session.prepared
        summary = _summary(pages, prepared.model_id, prepared.request.format, time.monotonic() - session.started,
                           prepared.cache_hit)
        yield (json.dumps({"summary": summary}, ensure_ascii=False) + "\n").encode()

    app.include_router(openai_router(core))

    @app.post("/v1/jobs", **schema.JOB_SUBMIT_ROUTE)
    async def submit_job(request: Request) -> JSONResponse:
        """Validate the document now (4xx as for /v1/ocr) and start an asynchronous job; 202 with the job.
        An ``Idempotency-Key`` header returns the job first created with that key.
        """
        core.check_accepting()
        with core.request_dir() as tmp:
            upload, opts = await receive_upload(request, core, tmp)
            job = await core.jobs.submit(upload, opts, request.headers.get("idempotency-key", "").strip())
        return JSONResponse(_job_json(job), status_code=202, headers={"Location": f"/v1/jobs/{job.job_id}"})

    @app.get("/v1/jobs/{job_id}", **schema.JOB_STATUS_ROUTE)
    async def get_job(job_id: str) -> dict[str, Any]:
        """Status (queued | running | done | failed | cancelled), pages_done / pages_total, error."""
        return _job_json(core.jobs.get(job_id))

    @app.get("/v1/jobs/{job_id}/result", **schema.JOB_RESULT_ROUTE)
    async def job_result(job_id: str,
                         format: str = Query(  # noqa: A002 - the query parameter's name
                             "", description=schema.FORMAT_QUERY_DESCRIPTION,
                             examples=["markdown", "text", "json", "hocr"],
                         )) -> Response:
        """The document of a done job in its format (or ``?format=``); 202 with the job while it runs;
        the job's error status when it failed; 409 FAILED_PRECONDITION (reason JOB_CANCELLED) when it
        was cancelled.
        """
        res = core.jobs.result(job_id)
        if isinstance(res, JobRecord):
            if res.status in ("queued", "running"):
                return JSONResponse(_job_json(res), status_code=202, headers={"Retry-After": "2"})
            if res.status == "cancelled":
                raise JobCancelled(f"job {job_id} was cancelled; it has no result")
            code, _, message = res.error.partition(": ")
            raise error_for_code(code or "INTERNAL", message or "the job failed")
        fmt = OcrRequest(format=format or res.job.options.get("format", "markdown")).validated().format
        if fmt == "pdf":
            pdf = core.results.local_path(f"jobs/{job_id}.pdf")
            if pdf is None:
                raise FailedPrecondition(f"job {job_id} was not submitted with format=pdf; its document is no "
                                         "longer kept, so ask for markdown, text, json or hocr")
            return StreamingResponse(file_chunks(pdf), media_type=MEDIA["pdf"],
                                     headers={"X-Job-Id": job_id, **_cache_header(res.cached)})
        return _document_response(res.pages, fmt, res.model_id, res.seconds, {"X-Job-Id": job_id}, res.cached)

    @app.delete("/v1/jobs/{job_id}", **schema.JOB_CANCEL_ROUTE)
    async def cancel_job(job_id: str) -> dict[str, Any]:
        """Cancel a queued or running job (pages in progress are abandoned); returns the job."""
        return _job_json(await core.jobs.cancel(job_id))

    @app.get("/healthz", summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        """Liveness: 200 while the process answers (also while draining)."""
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness: an encoder and a decoder replica are SERVING")
    async def readyz() -> JSONResponse:
        """Readiness: 200 when an encoder and a decoder replica are SERVING, else 503 with the reason
        (also 503 while draining).
        """
        if core.draining:
            return JSONResponse({"ready": False, "reason": "draining"}, status_code=503)
        ok, reason = await core.service.ready()
        return JSONResponse({"ready": ok, "reason": reason}, status_code=200 if ok else 503)

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics() -> Response:
        """Prometheus text exposition of the process's OpenTelemetry metrics."""
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return app
