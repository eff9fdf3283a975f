"""Fixtures of the operations tests: an in-memory span sink on the process's tracer provider."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from inkstream import tracing

_sink: InMemorySpanExporter | None = None


@pytest.fixture
def spans() -> InMemorySpanExporter:
    """Finished spans of this test. The global provider is installed once per process (whatever
    installed it first); one in-memory sink is added to it once and cleared for each test."""
    global _sink
    if _sink is None:
        provider = tracing.setup_tracing("inkstream-test", exporter="none")
        _sink = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(_sink))
    _sink.clear()
    yield _sink
    _sink.clear()
