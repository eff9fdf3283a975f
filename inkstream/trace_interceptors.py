"""Trace context and request id across process boundaries on gRPC: grpc.aio server / client
interceptors (see :mod:`inkstream.tracing` for the set-up and exporters, :mod:`inkstream.request_id`
for the request-id context variable, :mod:`inkstream.trace_asgi` for the REST API's middleware).

* :class:`ServerInterceptor` extracts W3C ``traceparent``/``tracestate`` and ``x-request-id`` from
  the call's metadata and opens a SERVER span per RPC named ``package.Service/Method`` (OTel RPC
  semantic conventions: ``rpc.system``, ``rpc.service``, ``rpc.method``, ``rpc.grpc.status_code``)
  with attribute ``inkstream.request_id``. Health checks are passed through untraced.
* :func:`client_interceptors` (unary-unary, unary-stream, stream-unary, stream-stream) open a CLIENT
  span per outgoing call and inject its context and the current request id into the metadata.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from inkstream.request_id import (
    REQUEST_ID_ATTR,
    REQUEST_ID_KEY,
    _request_id,
    current_request_id,
    new_request_id,
    valid_request_id,
)
from inkstream.tracing import tracer


def _rpc_names(method: str) -> tuple[str, str, str]:
    """``"/pkg.Service/Method"`` -> (span name ``pkg.Service/Method``, service, method)."""
    path = method.lstrip("/")
    service, _, name = path.rpartition("/")
    return path, service, name


# ---------------------------------------------------------------------------------------------------
# server side


def _metadata_dict(metadata: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in metadata or ():
        key, value = item[0], item[1]
        if isinstance(value, str):
            out[key.lower()] = value
    return out


class ServerInterceptor(grpc.aio.ServerInterceptor):
    """grpc.aio server interceptor: one SERVER span per RPC, parented on the caller's ``traceparent``,
    and the caller's ``x-request-id`` (or a new one) current while the handler runs.

    Install with ``grpc.aio.server(interceptors=[ServerInterceptor()])``. Works for unary and
    streaming handlers written as coroutines or async generators; other handlers pass through.
    """

    async def intercept_service(self, continuation, handler_call_details):
        """The handler for ``handler_call_details``, its behaviour wrapped in a span (None: unknown method)."""
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        if method.startswith("/grpc.health.v1.Health/"):
            return handler  # probes every few seconds: no span, no request id
        meta = _metadata_dict(handler_call_details.invocation_metadata)
        for field in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
            behavior = getattr(handler, field)
            if behavior is not None:
                return handler._replace(**{field: _wrap_behavior(behavior, method, meta)})
        return handler


def _open_server_span(method: str, meta: dict[str, str]) -> trace.Span:
    """Start the SERVER span of one RPC and make it and the request id current.

    grpc.aio runs each RPC's interceptors and handler in a context of its own ("the same Context is
    used for downstream interceptors and for the final handler call", ``grpc.aio.ServerInterceptor``),
    so nothing is reset afterwards: a reset would fail anyway when a streaming handler's generator is
    closed from another task (``Token ... was created in a different Context``).
    """
    name, service, rpc_method = _rpc_names(method)
    parent = propagate.extract(meta)
    rid = meta.get(REQUEST_ID_KEY)
    rid = rid if valid_request_id(rid) else new_request_id()
    _request_id.set(rid)
    span = tracer().start_span(
        name, context=parent, kind=SpanKind.SERVER,
        attributes={"rpc.system": "grpc", "rpc.service": service, "rpc.method": rpc_method, REQUEST_ID_ATTR: rid},
    )
    otel_context.attach(trace.set_span_in_context(span, parent))
    return span


def _finish_server_span(span: trace.Span, context: Any, exc: BaseException | None) -> None:
    """Record the RPC's status code on ``span`` (ERROR unless OK) and end it."""
    code: grpc.StatusCode | None = None
    if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
        code = grpc.StatusCode.CANCELLED
    else:
        with contextlib.suppress(Exception):
            code = context.code()
        if code is None:
            code = grpc.StatusCode.OK if exc is None else grpc.StatusCode.UNKNOWN
    if isinstance(code, int):  # aio contexts may report the raw integer
        code = next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code is not grpc.StatusCode.OK:
        span.set_status(Status(StatusCode.ERROR, code.name))
    span.end()


def _wrap_behavior(behavior: Any, method: str, meta: dict[str, str]) -> Any:
    if inspect.isasyncgenfunction(behavior):

        async def stream_wrapper(request_or_iterator, context):
            span = _open_server_span(method, meta)
            exc: BaseException | None = None
            try:
                async for item in behavior(request_or_iterator, context):
                    yield item
            except BaseException as e:  # recorded, then re-raised
                exc = e
                raise
            finally:
                _finish_server_span(span, context, exc)

        return stream_wrapper
    if inspect.iscoroutinefunction(behavior):

        async def unary_wrapper(request_or_iterator, context):
            span = _open_server_span(method, meta)
            exc: BaseException | None = None
            try:
                return await behavior(request_or_iterator, context)
            except BaseException as e:
                exc = e
                raise
            finally:
                _finish_server_span(span, context, exc)

        return unary_wrapper
    return behavior


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    """The interceptors every inkstream gRPC server installs (tracing + request id)."""
    return [ServerInterceptor()]


# ---------------------------------------------------------------------------------------------------
# client side


def outgoing_metadata(metadata: Any, span_context: otel_context.Context | None = None) -> grpc.aio.Metadata:
    """``metadata`` plus ``traceparent``/``tracestate`` of ``span_context`` (default: current) and the
    current ``x-request-id``; existing values of those keys are replaced.
    """
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=span_context)
    rid = current_request_id()
    if rid:
        carrier[REQUEST_ID_KEY] = rid
    replaced = {k.lower() for k in carrier}
    out = grpc.aio.Metadata()
    for key, value in (metadata or ()):
        if key.lower() not in replaced:
            out.add(key, value)
    for key, value in carrier.items():
        out.add(key.lower(), value)
    return out


async def _end_span(call: Any, span: trace.Span) -> None:
    """End ``span`` with the finished ``call``'s status code."""
    try:
        code = await call.code()
    except BaseException:  # noqa: BLE001 - cancelled / interrupted
        code = grpc.StatusCode.CANCELLED
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code is not grpc.StatusCode.OK:
        span.set_status(Status(StatusCode.ERROR, code.name))
    span.end()


def _end_span_when_done(span: trace.Span, call: Any) -> None:
    """Done callback of a client call: end its span from a task (``code()`` is a coroutine)."""
    try:
        asyncio.get_running_loop().create_task(_end_span(call, span))
    except RuntimeError:  # loop gone: end without a status
        span.end()


class _ClientInterceptor:
    """Shared body of the four grpc.aio client interceptor shapes."""

    def _start(self, details: grpc.aio.ClientCallDetails) -> tuple[trace.Span, grpc.aio.ClientCallDetails]:
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        name, service, rpc_method = _rpc_names(method)
        attrs = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": rpc_method}
        rid = current_request_id()
        if rid:
            attrs[REQUEST_ID_ATTR] = rid
        span = tracer().start_span(name, kind=SpanKind.CLIENT, attributes=attrs)
        meta = outgoing_metadata(details.metadata, trace.set_span_in_context(span))
        new = grpc.aio.ClientCallDetails(details.method, details.timeout, meta, details.credentials,
                                         details.wait_for_ready)
        return span, new

    @staticmethod
    def _end_when_done(call: Any, span: trace.Span) -> Any:
        # The done callback gets the call as its argument and closes over the span only: a closure
        # that referenced ``call`` would form a cycle (call -> its callbacks -> closure -> call)
        # keeping each finished call, and its native gRPC state, alive until a full collection.
        if hasattr(call, "add_done_callback"):
            call.add_done_callback(functools.partial(_end_span_when_done, span))
        else:  # a plain response object (already finished)
            span.end()
        return call

    async def _intercept(self, continuation, details, request):
        span, new = self._start(details)
        try:
            call = await continuation(new, request)
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            span.end()
            raise
        return self._end_when_done(call, span)


class UnaryUnaryClientInterceptor(_ClientInterceptor, grpc.aio.UnaryUnaryClientInterceptor):
    """Client span + trace / request-id metadata for unary-unary calls."""

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        """Start the call with the extra metadata; its span ends when the call does."""
        return await self._intercept(continuation, client_call_details, request)


class UnaryStreamClientInterceptor(_ClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Client span + trace / request-id metadata for unary-stream calls."""

    async def intercept_unary_stream(self, continuation, client_call_details, request):
        """Start the call with the extra metadata; its span ends when the response stream does."""
        return await self._intercept(continuation, client_call_details, request)


class StreamUnaryClientInterceptor(_ClientInterceptor, grpc.aio.StreamUnaryClientInterceptor):
    """Client span + trace / request-id metadata for stream-unary calls."""

    async def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        """Start the call with the extra metadata; its span ends when the call does."""
        return await self._intercept(continuation, client_call_details, request_iterator)


class StreamStreamClientInterceptor(_ClientInterceptor, grpc.aio.StreamStreamClientInterceptor):
    """Client span + trace / request-id metadata for stream-stream calls."""

    async def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        """Start the call with the extra metadata; its span ends when the response stream does."""
        return await self._intercept(continuation, client_call_details, request_iterator)


def client_interceptors() -> list[grpc.aio.ClientInterceptor]:
    """Interceptors for ``grpc.aio.insecure_channel(target, options, interceptors=...)`` /
    ``secure_channel``: trace context + request id on every outgoing call, one CLIENT span each.
    """
    return [UnaryUnaryClientInterceptor(), UnaryStreamClientInterceptor(),
            StreamUnaryClientInterceptor(), StreamStreamClientInterceptor()]
