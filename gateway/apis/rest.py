"""REST API (FastAPI): the application, its error mapping and middleware; the routes are APIRouters
in :mod:`gateway.apis.rest_ocr` (``POST /v1/ocr``), :mod:`gateway.apis.rest_jobs` (jobs, uploads, queue admin),
:mod:`gateway.apis.openai_api` (OpenAI-compatible) and :mod:`gateway.apis.rest_probes` (health, readiness,
metrics). OpenAPI at ``/openapi.json``. A gateway with ``role: worker`` serves only the probes and
metrics.

Errors are mapped by :mod:`inkstream.errors` only (``{"error": {"code", "reason", "message"}}``
with the mapped status and ``Retry-After`` when hinted).

Uploads: ``multipart/form-data`` with the document in the ``file`` field and options as form fields
(or query parameters), or the raw document as the body with options as query parameters; any other
form field or query parameter is refused (400), so a misspelt option is not silently ignored.
Unknown routes (404) and wrong methods (405) answer in the same error shape. The
declared ``Content-Length`` is checked before anything is read; the body is then streamed to a
request-scoped temp file with a running byte count (413 as soon as it passes the limit).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway.apis.auth import ApiKeyMiddleware, ApiKeys
from gateway.apis.openai_api import openai_router
from gateway.apis.rest_http import CatchAll, InflightMiddleware, error_response
from gateway.apis.rest_jobs import jobs_router
from gateway.apis.rest_ocr import MEDIA, NDJSON
from gateway.apis.rest_ocr import ocr_router as ocr_router
from gateway.apis.rest_probes import probes_router
from gateway.config import GatewayConfig
from gateway.core import GatewayCore
from gateway.types import PagePipeline
from inkstream import trace_asgi
from inkstream.errors import InkstreamError, InvalidInput, MethodNotAllowed, NotFound, Unauthenticated

__all__ = ["MEDIA", "NDJSON", "create_app"]
_HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def allowed_methods(app: FastAPI, path: str, fallback: str = "") -> str:
    """``Allow`` for a 405 on ``path``: the methods ``/openapi.json`` documents for the path template it
    matches (Starlette lists only the first matching route's, so ``/v1/jobs/{id}`` lost DELETE), upper
    case, sorted, comma-separated; ``fallback`` for an undocumented path.
    """
    for template, ops in app.openapi().get("paths", {}).items():
        if re.fullmatch(re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template)), path):
            return ", ".join(sorted(m.upper() for m in ops if m in _HTTP_METHODS))
    return fallback


def create_app(config: GatewayConfig, pipeline: PagePipeline, core: GatewayCore | None = None,
               api_keys: ApiKeys | None = None) -> FastAPI:
    """The REST application. ``pipeline``: any :class:`gateway.types.PagePipeline` (tests inject a
    fake). ``core``: share one :class:`GatewayCore` with the gRPC server; when None the app creates
    its own and closes it on shutdown. The core is at ``app.state.core``. ``api_keys``: when given,
    every route but the probes and /metrics needs a key (:mod:`gateway.apis.auth`).
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
            allow = allowed_methods(app, request.url.path, (exc.headers or {}).get("Allow", ""))
            resp = error_response(MethodNotAllowed(
                f"{what}: this route does not take {request.method}; it takes {allow} (see /openapi.json)"))
            resp.headers["Allow"] = allow
        elif exc.status_code == 404:
            resp = error_response(NotFound(f"{what}: no such route (the API is described at /docs and /openapi.json)"))
        elif exc.status_code == 401:
            resp = error_response(Unauthenticated(f"{what}: {exc.detail}"))
        else:
            resp = error_response(InvalidInput(f"{what}: {exc.detail}"))
            resp.status_code = exc.status_code
        for k, v in (exc.headers or {}).items():
            if k.lower() != "allow":
                resp.headers[k] = v
        return resp

    @app.exception_handler(RequestValidationError)
    async def _params_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(x) for x in e.get('loc', ()))}: {e.get('msg', '')}" for e in exc.errors())
        return error_response(InvalidInput(f"{request.method} {request.url.path}: {problems}"))

    app.add_middleware(CatchAll)
    app.add_middleware(InflightMiddleware, core=core)
    if api_keys is not None:  # inside the request id's middleware: a refused key's audit line carries it
        app.add_middleware(ApiKeyMiddleware, keys=api_keys)
    app.add_middleware(trace_asgi.asgi_middleware)  # X-Request-Id, SERVER span attributes

    if config.role != "worker":
        app.include_router(ocr_router(core))
        app.include_router(openai_router(core))
        app.include_router(jobs_router(core))
    app.include_router(probes_router(core))
    return app
