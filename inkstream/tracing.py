"""Distributed tracing for the gateway, encoder and decoder (OpenTelemetry SDK): provider and exporters.

One document request keeps one W3C trace (https://www.w3.org/TR/trace-context/) and one request id
from the gateway through every encoder and decoder call:

* :func:`setup_tracing` installs the process's ``TracerProvider`` with the exporter chosen by
  configuration (argument, else env ``INKSTREAM_TRACES_EXPORTER``):

  ``none``     no export (spans are still created, so trace ids reach the logs);
  ``console``  one JSON document per span on stdout (the SDK's ``ConsoleSpanExporter``);
  ``otlp``     OTLP/gRPC to ``OTEL_EXPORTER_OTLP_ENDPOINT`` (standard OTel env vars); needs the
               PyPI package ``opentelemetry-exporter-otlp-proto-grpc`` (not a default dependency);
  ``jsonl``    one JSON line per finished span appended to ``INKSTREAM_TRACES_FILE`` (every process
               may share one file: each span is a single ``O_APPEND`` write). Setting
               ``INKSTREAM_TRACES_FILE`` alone selects ``jsonl``. Used by system tests;
  ``memory``   the SDK's ``InMemorySpanExporter`` (in-process tests; see :func:`memory_exporter`).

Interceptors (modules :mod:`inkstream.trace_interceptors` for gRPC and :mod:`inkstream.trace_asgi`
for HTTP, which import this one, never the reverse):

* :class:`ServerInterceptor` (grpc.aio) extracts ``traceparent``/``tracestate`` and ``x-request-id``
  from the call's metadata, opens a SERVER span per RPC named ``package.Service/Method`` (OTel RPC
  semantic conventions: ``rpc.system``, ``rpc.service``, ``rpc.method``, ``rpc.grpc.status_code``)
  with attribute ``inkstream.request_id``, and makes both current for the handler.
* :func:`client_interceptors` (grpc.aio, all four call shapes) open a CLIENT span per outgoing call
  and inject its context and the current request id into the outgoing metadata.
* :class:`asgi_middleware` does the request id for the gateway's REST API (``X-Request-Id`` header
  in and out); FastAPI's own telemetry opens the HTTP span, else the middleware does.

The request id (:mod:`inkstream.request_id`) lives in a :mod:`contextvars` variable, so it follows
``asyncio`` tasks created while handling the request; :mod:`inkstream.logs` stamps it (and the
trace/span ids) on every log line.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

log = logging.getLogger("inkstream.tracing")

EXPORTERS = ("none", "console", "otlp", "jsonl", "memory")
OTLP_PACKAGE = "opentelemetry-exporter-otlp-proto-grpc"

_lock = threading.Lock()
_memory: InMemorySpanExporter | None = None
_TRACER_NAME = "inkstream"


# ---------------------------------------------------------------------------------------------------
# provider and exporters


class JsonLinesSpanExporter(SpanExporter):
    """Appends each finished span as one JSON line to ``path`` (shared by several processes).

    Line fields: ``name``, ``trace_id`` (32 hex), ``span_id`` (16 hex), ``parent_span_id`` (16 hex or
    null), ``kind`` (``SERVER``/``CLIENT``/``INTERNAL``), ``service`` (resource ``service.name``),
    ``pid``, ``start_ns``/``end_ns`` (Unix epoch nanoseconds), ``status`` (``UNSET``/``OK``/``ERROR``),
    ``attributes``. A line is written with one ``write(2)`` on an ``O_APPEND`` descriptor, which
    Linux keeps whole for regular files, so concurrent processes do not interleave lines.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)

    @staticmethod
    def to_dict(span: ReadableSpan) -> dict[str, Any]:
        """The JSON-ready dictionary of one finished span (fields as in the class docstring)."""
        ctx = span.get_span_context()
        assert ctx is not None  # set on every SDK span from its start
        parent = span.parent
        return {
            "name": span.name,
            "trace_id": format(ctx.trace_id, "032x"),
            "span_id": format(ctx.span_id, "016x"),
            "parent_span_id": format(parent.span_id, "016x") if parent is not None else None,
            "kind": span.kind.name,
            "service": span.resource.attributes.get("service.name"),
            "pid": os.getpid(),
            "start_ns": span.start_time,
            "end_ns": span.end_time,
            "status": span.status.status_code.name,
            "attributes": {k: v if isinstance(v, (str, int, float, bool)) else list(v or ())
                           for k, v in (span.attributes or {}).items()},
        }

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Append ``spans`` to the file, one JSON object per line, in one write; FAILURE (logged) on an
        OSError, never raises.
        """
        data = "".join(json.dumps(self.to_dict(s), separators=(",", ":")) + "\n" for s in spans).encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("could not write spans to the traces file", extra={"error": type(exc).__name__})
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release: the file is opened and closed by every export."""
        return None


def _exporter_choice(exporter: str | None, traces_file: str | None) -> tuple[str, str | None]:
    traces_file = traces_file or os.environ.get("INKSTREAM_TRACES_FILE") or None
    choice = (exporter or os.environ.get("INKSTREAM_TRACES_EXPORTER") or ("jsonl" if traces_file else "none")).lower()
    if choice not in EXPORTERS:
        raise ValueError(f"unknown traces exporter {choice!r}; choose one of {', '.join(EXPORTERS)}")
    if choice == "jsonl" and not traces_file:
        raise ValueError("traces exporter 'jsonl' needs a file: set INKSTREAM_TRACES_FILE=/path/to/spans.jsonl")
    return choice, traces_file


def _span_processor(choice: str, traces_file: str | None):
    global _memory
    if choice == "console":
        return SimpleSpanProcessor(ConsoleSpanExporter())
    if choice == "jsonl":
        assert traces_file, "checked by _exporter_choice"
        # Simple (synchronous) processor: a span is on disk when it ends, so tests can read it at once.
        return SimpleSpanProcessor(JsonLinesSpanExporter(traces_file))
    if choice == "memory":
        _memory = _memory or InMemorySpanExporter()
        return SimpleSpanProcessor(_memory)
    if choice == "otlp":
        try:  # lazy: an optional dependency (the otlp extra)
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise RuntimeError(f"traces exporter 'otlp' needs the PyPI package {OTLP_PACKAGE}") from None
        return BatchSpanProcessor(OTLPSpanExporter())
    return None


def setup_tracing(service_name: str, exporter: str | None = None, traces_file: str | None = None,
                  provider: TracerProvider | None = None) -> TracerProvider:
    """Install the global TracerProvider for this process (idempotent: a second call returns the first).

    ``service_name`` becomes the resource's ``service.name`` (e.g. ``"inkstream-encoder"``);
    ``exporter`` is one of :data:`EXPORTERS` (default from env, see module docstring); ``provider``
    lets a caller supply its own (its processors are kept, the chosen exporter is added).
    Raises ValueError for an unknown exporter or ``jsonl`` without a file, RuntimeError for ``otlp``
    without its package.
    """
    with _lock:
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            return current
        choice, path = _exporter_choice(exporter, traces_file)
        provider = provider or TracerProvider(resource=Resource.create({"service.name": service_name}))
        processor = _span_processor(choice, path)
        if processor is not None:
            provider.add_span_processor(processor)
        trace.set_tracer_provider(provider)
        return provider


def memory_exporter() -> InMemorySpanExporter | None:
    """The in-memory exporter installed by ``setup_tracing(..., exporter="memory")``, else None."""
    return _memory


def tracer() -> trace.Tracer:
    """The inkstream tracer from the global provider (a no-op tracer before :func:`setup_tracing`)."""
    return trace.get_tracer(_TRACER_NAME)
