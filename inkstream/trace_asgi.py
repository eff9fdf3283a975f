"""Trace context and request id for the gateway's REST API: an ASGI middleware (``X-Request-Id`` in
and out; an HTTP SERVER span when no framework span is current). Its gRPC counterparts are in
:mod:`inkstream.trace_interceptors`; the set-up and exporters in :mod:`inkstream.tracing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from inkstream.request_id import REQUEST_ID_ATTR, REQUEST_ID_KEY, _request_id, new_request_id, valid_request_id
from inkstream.tracing import tracer


class asgi_middleware:  # used like a function: app.add_middleware(asgi_middleware)
    """ASGI middleware for the gateway's REST API: the request id from ``X-Request-Id`` (validated) or
    a new one is current while the request is handled and echoed in the response's ``X-Request-Id``.

    FastAPI >= 0.160 opens the HTTP SERVER span itself (``FastAPI(telemetry=...)``, on by default,
    parented on an incoming ``traceparent``); this middleware then only adds the attribute
    ``inkstream.request_id`` to that span. When no recording span is current (FastAPI telemetry off,
    or a plain Starlette app), it opens the SERVER span itself, with ``http.request.method``,
    ``http.route`` (the path, never the query string) and ``http.response.status_code``.
    Paths in ``skip_paths`` (probes, metrics) get neither. Install: ``app.add_middleware(asgi_middleware)``.
    """

    def __init__(self, app: Any, skip_paths: Sequence[str] = ("/healthz", "/readyz", "/livez", "/metrics")):
        self.app = app
        self.skip_paths = tuple(skip_paths)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        """ASGI entry point: HTTP requests outside ``skip_paths`` run with a request id (and a span)."""
        if scope.get("type") != "http" or scope.get("path", "") in self.skip_paths:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        rid = headers.get(REQUEST_ID_KEY)
        rid = rid if valid_request_id(rid) else new_request_id()
        token = _request_id.set(rid)
        status_holder = {"code": 500}

        async def send_wrapper(message: dict) -> None:
            if message["type"] == "http.response.start":
                status_holder["code"] = message["status"]
                message = dict(message)
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode())]
            await send(message)

        try:
            current = trace.get_current_span()
            if current.is_recording():
                current.set_attribute(REQUEST_ID_ATTR, rid)
                await self.app(scope, receive, send_wrapper)
                return
            path = scope.get("path", "")
            attrs = {"http.request.method": scope.get("method", ""), "http.route": path, REQUEST_ID_ATTR: rid}
            with tracer().start_as_current_span(f"{scope.get('method', 'HTTP')} {path}",
                                                context=propagate.extract(headers),
                                                kind=SpanKind.SERVER, attributes=attrs) as span:
                try:
                    await self.app(scope, receive, send_wrapper)
                finally:
                    span.set_attribute("http.response.status_code", status_holder["code"])
                    if status_holder["code"] >= 500:
                        span.set_status(Status(StatusCode.ERROR, str(status_holder["code"])))
        finally:
            _request_id.reset(token)
