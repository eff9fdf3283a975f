"""Unit tests of inkstream.logs: JSON line fields, context ids, and the no-content redaction rules."""

from __future__ import annotations

import io
import json
import logging

import pytest
from opentelemetry import trace

from inkstream import logs, request_id, tracing


@pytest.fixture
def capture():
    stream = io.StringIO()
    handler = logs.setup_logging("encoder", level="DEBUG", stream=stream)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    logging.getLogger().removeHandler(handler)


def test_fields_and_context_ids(capture, spans):
    log = logging.getLogger("inkstream.test")
    with request_id.request_scope("req-42"):
        with tracing.tracer().start_as_current_span("work") as span:
            log.info("page done", extra={"pages": 3, "seconds": 0.25})
            ctx = span.get_span_context()
    log.warning("outside")
    inside, outside = capture()
    assert inside["message"] == "page done" and inside["level"] == "INFO" and inside["service"] == "encoder"
    assert inside["logger"] == "inkstream.test" and inside["request_id"] == "req-42"
    assert inside["trace_id"] == format(ctx.trace_id, "032x") and inside["span_id"] == format(ctx.span_id, "016x")
    assert inside["pages"] == 3 and inside["seconds"] == 0.25
    assert inside["time"].endswith("+00:00") and "T" in inside["time"]
    assert outside["request_id"] is None and "trace_id" not in outside
    assert not trace.get_current_span().get_span_context().is_valid


def test_forbidden_fields_and_bytes_never_logged(capture):
    secret_text = "Confidential merger agreement between ACME and Globex"
    log = logging.getLogger("inkstream.test")
    log.info("upload received", extra={
        "file_name": "acme_secret_plan.pdf", "text": secret_text, "image": b"\x89PNG" + b"\0" * 100,
        "password": "hunter2", "payload": b"\x00" * 2048, "nested": {"text": secret_text, "n": 1},
        "long": "y" * 5000, "authorization": "Bearer sk-abcdef",
    })
    (line,) = capture()
    raw = json.dumps(line)
    for leak in (secret_text, "acme_secret_plan", "hunter2", "sk-abcdef", "PNG"):
        assert leak not in raw
    assert line["file_name"] == logs.REDACTED and line["text"] == logs.REDACTED and line["image"] == logs.REDACTED
    assert line["payload"] == "<2048 bytes>"
    assert line["nested"] == {"text": logs.REDACTED, "n": 1}
    assert len(line["long"]) < 600 and line["long"].endswith("[cut]")


def test_exception_and_long_message(capture):
    log = logging.getLogger("inkstream.test")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed")
    log.info("x" * 10_000)
    exc_line, long_line = capture()
    assert exc_line["exc_type"] == "RuntimeError" and "Traceback" in exc_line["exc"] and exc_line["level"] == "ERROR"
    assert len(long_line["message"]) <= logs.MAX_MESSAGE_CHARS + 10


def test_setup_twice_keeps_one_handler_and_text_format():
    stream = io.StringIO()
    logs.setup_logging("gateway", stream=io.StringIO())
    handler = logs.setup_logging("gateway", stream=stream, fmt="text")
    try:
        ours = [h for h in logging.getLogger().handlers if getattr(h, "_inkstream", False)]
        assert ours == [handler]
        logging.getLogger("inkstream.t").info("hello", extra={"text": "secret words"})
        out = stream.getvalue()
        assert "hello" in out and "secret words" not in out and logs.REDACTED in out
    finally:
        logging.getLogger().removeHandler(handler)


def test_access_log_query_string_is_dropped(capture):
    access = logging.getLogger("uvicorn.access")
    access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "POST", "/v1/ocr?format=json&password=hunter2",
                "1.1", 200, extra={"color_message": "x"})
    (line,) = capture()
    assert "hunter2" not in json.dumps(line)
    assert line["message"] == '127.0.0.1:5000 - "POST /v1/ocr?[query redacted] HTTP/1.1" 200'
    assert "color_message" not in line
