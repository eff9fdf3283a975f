"""REST API (FastAPI): ``POST /v1/ocr``, jobs, health, readiness, metrics. OpenAPI at ``/openapi.json``.

Handlers convert HTTP to :class:`gateway.service.OcrRequest` / uploads and back; the work is in
:mod:`gateway.service` and :mod:`gateway.jobs`. Errors are mapped by :mod:`inkstream.errors` only
(``{"error": {"code", "reason", "message"}}`` with the mapped status and ``Retry-After`` when hinted).

NDJSON (``Accept: application/x-ndjson``): one ``{"page": {...}}`` line per page in page order as
soon as it is ready, then ``{"summary": {...}}`` (its ``document`` is empty for format=json: the
page lines are the JSON result). Headers ``X-Pages-Total``, ``X-Model-Id``, ``X-Cache`` (hit|miss).

Uploads: ``multipart/form-data`` with the document in the ``file`` field and options as form fields
(or query parameters), or the raw document as the body with options as query parameters; any other
form field or query parameter is refused (400), so a misspelt option is not silently ignored.
Unknown routes (404) and wrong methods (405) answer in the same error shape. The
declared ``Content-Length`` is checked before anything is read; the body is then streamed to a
request-scoped temp file with a running byte count (413 as soon as it passes the limit).
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from inkstream import trace_interceptors
from inkstream.request_id import current_request_id
from inkstream.errors import (InkstreamError, InvalidInput, MethodNotAllowed, NotFound, Unauthenticated, error_for_code,
                             http_status)

from gateway.auth import ApiKeyMiddleware, ApiKeys
from gateway.config import GatewayConfig
from gateway.core import GatewayCore
from gateway.rest_http import (ERRORS, UPLOAD_DOC, CatchAll, InflightMiddleware, StreamWithCleanup,
                               collect_while_connected, error_response, receive_upload)
from gateway.service import OcrRequest, Prepared, run_id
from gateway.stitch import PageResult, document_json, render_document
from gateway.stores import JobRecord
from gateway.types import PagePipeline

NDJSON = "application/x-ndjson"
MEDIA = {"markdown": "text/markdown; charset=utf-8", "text": "text/plain; charset=utf-8", "json": "application/json"}


def _job_json(job: JobRecord) -> dict[str, Any]:
    return {"job_id": job.job_id, "status": job.status, "pages_done": job.pages_done,
            "pages_total": job.pages_total, "error": job.error, "model_id": job.model_id,
            "options": job.options, "created_at": job.created_at, "updated_at": job.updated_at}


def _document_response(pages: list[PageResult], fmt: str, model_id: str, seconds: float,
                       headers: dict[str, str]) -> Response:
    if fmt == "json":
        return JSONResponse(document_json(pages, model_id, seconds), headers=headers)
    return Response(render_document(pages, fmt), media_type=MEDIA[fmt], headers=headers)


def _summary(pages: list[PageResult], model_id: str, fmt: str, seconds: float) -> dict[str, Any]:
    return {"model_id": model_id, "pages": len(pages), "pages_ok": sum(p.status == "ok" for p in pages),
            "pages_error": sum(p.status != "ok" for p in pages), "seconds": round(seconds, 3),
            "document": "" if fmt == "json" else render_document(pages, fmt)}


def create_app(config: GatewayConfig, pipeline: PagePipeline, core: GatewayCore | None = None,
               api_keys: ApiKeys | None = None) -> FastAPI:
    """The REST application. ``pipeline``: any :class:`gateway.types.PagePipeline` (tests inject a
    fake). ``core``: share one :class:`GatewayCore` with the gRPC server; when None the app creates
    its own and closes it on shutdown. The core is at ``app.state.core``. ``api_keys``: when given,
    every route but the probes and /metrics needs a key (:mod:`gateway.auth`)."""
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
    m = core.metrics

    @app.exception_handler(InkstreamError)
    async def _inkstream_error(_: Request, exc: InkstreamError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _route_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Unknown routes and wrong methods answer in the same error shape as everything else."""
        what = f"{request.method} {request.url.path}"
        if exc.status_code == 405:
            resp = error_response(MethodNotAllowed(f"{what}: this route does not take {request.method} (see /openapi.json)"))
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

    @app.post("/v1/ocr", openapi_extra=UPLOAD_DOC, summary="OCR a document (whole result, or NDJSON per page)",
              responses={200: {"content": {MEDIA["markdown"]: {}, MEDIA["text"]: {}, NDJSON: {}}}, **ERRORS})
    async def ocr(request: Request) -> Response:
        """OCR a document: multipart field ``file`` (PDF, PNG, JPEG, TIFF, WebP, BMP, GIF) plus options
        ``format``, ``pages``, ``mode``, ``task``, ``password``. Returns the whole document
        (text/markdown, text/plain or JSON), or with ``Accept: application/x-ndjson`` one JSON line per
        page as soon as it is ready, in page order, then a summary line."""
        request_id = run_id(current_request_id(), "x-request-id" in request.headers)
        started = time.monotonic()
        stack = contextlib.AsyncExitStack()
        try:
            core.check_accepting()
            await stack.enter_async_context(core.service.admit(request_id))
            tmp = stack.enter_context(core.request_dir())
            upload, opts = await receive_upload(request, core, tmp)
            prepared: Prepared = await stack.enter_async_context(await core.service.prepare(upload, opts, request_id))
            fmt = prepared.request.format
            pages_iter = prepared.pages(core.config.request_timeout_s)
            stack.push_async_callback(pages_iter.aclose)
            if NDJSON in request.headers.get("accept", ""):
                first = await anext(pages_iter, None)  # early pipeline errors still get their status
                headers = {"X-Pages-Total": str(prepared.page_count), "X-Model-Id": prepared.model_id,
                           "X-Cache": "hit" if prepared.cache_hit else "miss"}
                return StreamWithCleanup(_ndjson(first, pages_iter, prepared, fmt, started), stack,
                                         media_type=NDJSON, headers=headers)
            pages = await collect_while_connected(request, pages_iter)
            for p in pages:
                m.pages.add(1, {"status": p.status, "finish_reason": p.finish_reason})
            headers = {"X-Model-Id": prepared.model_id,
                       "X-Cache": "hit" if prepared.cache_hit else "miss"}
            await stack.aclose()
            m.requests.add(1, {"api": "rest", "route": "/v1/ocr", "status": "200"})
            m.duration.record(time.monotonic() - started)
            return _document_response(pages, fmt, prepared.model_id, time.monotonic() - started, headers)
        except BaseException as exc:
            await stack.aclose()
            if isinstance(exc, Exception):
                m.requests.add(1, {"api": "rest", "route": "/v1/ocr", "status": str(http_status(exc))})
            raise

    async def _ndjson(first: PageResult | None, rest: AsyncIterator[PageResult], prepared: Prepared,
                      fmt: str, started: float) -> AsyncIterator[bytes]:
        pages: list[PageResult] = []
        nxt = first
        while nxt is not None:
            pages.append(nxt)
            m.pages.add(1, {"status": nxt.status, "finish_reason": nxt.finish_reason})
            yield (json.dumps({"page": nxt.to_dict()}, ensure_ascii=False) + "\n").encode()
            nxt = await anext(rest, None)
        seconds = time.monotonic() - started
        summary = _summary(pages, prepared.model_id, fmt, seconds)
        m.requests.add(1, {"api": "rest", "route": "/v1/ocr", "status": "200"})
        m.duration.record(seconds)
        yield (json.dumps({"summary": summary}, ensure_ascii=False) + "\n").encode()

    @app.post("/v1/jobs", status_code=202, openapi_extra=UPLOAD_DOC, summary="Submit an asynchronous OCR job",
              responses=ERRORS)
    async def submit_job(request: Request) -> JSONResponse:
        """Validate the document now (4xx as for /v1/ocr) and start an asynchronous job; 202 with the job.
        An ``Idempotency-Key`` header returns the job first created with that key."""
        core.check_accepting()
        with core.request_dir() as tmp:
            upload, opts = await receive_upload(request, core, tmp)
            job = await core.jobs.submit(upload, opts, request.headers.get("idempotency-key", "").strip())
        return JSONResponse(_job_json(job), status_code=202, headers={"Location": f"/v1/jobs/{job.job_id}"})

    @app.get("/v1/jobs/{job_id}", summary="Job status: status, pages done / total")
    async def get_job(job_id: str) -> dict[str, Any]:
        """status (queued | running | done | failed | cancelled), pages_done / pages_total, error."""
        return _job_json(core.jobs.get(job_id))

    @app.get("/v1/jobs/{job_id}/result", summary="Result of a done job (202 with the status while not done)")
    async def job_result(job_id: str, format: str = "") -> Response:  # noqa: A002 - API parameter name
        """The document of a done job in its format (or ``?format=``); 202 with the job while it runs;
        the job's error status when it failed; 499 CANCELLED when it was cancelled."""
        res = core.jobs.result(job_id)
        if isinstance(res, JobRecord):
            if res.status in ("queued", "running"):
                return JSONResponse(_job_json(res), status_code=202, headers={"Retry-After": "2"})
            code, _, message = res.error.partition(": ")
            if res.status == "cancelled":
                code, message = "CANCELLED", "the job was cancelled"
            raise error_for_code(code or "INTERNAL", message or "the job failed")
        fmt = OcrRequest(format=format or res.job.options.get("format", "markdown")).validated().format
        return _document_response(res.pages, fmt, res.model_id, res.seconds, {"X-Job-Id": job_id})

    @app.delete("/v1/jobs/{job_id}", summary="Cancel a job")
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
        (also 503 while draining)."""
        if core.draining:
            return JSONResponse({"ready": False, "reason": "draining"}, status_code=503)
        ok, reason = await core.service.ready()
        return JSONResponse({"ready": ok, "reason": reason}, status_code=200 if ok else 503)

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics() -> Response:
        """Prometheus text exposition of the process's OpenTelemetry metrics."""
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return app
