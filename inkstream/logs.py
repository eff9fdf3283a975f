"""Structured JSON log lines for every inkstream process (stdlib :mod:`logging`).

One line per record, a JSON object with: ``time`` (UTC, RFC 3339 with milliseconds), ``level``,
``service``, ``logger``, ``message``, ``request_id`` (from :mod:`inkstream.tracing`), ``trace_id`` and
``span_id`` (hex, of the current OpenTelemetry span) when there is one, ``exc_type``/``exc`` for
exceptions, then the record's ``extra={...}`` fields.

**Privacy rule: log lines never contain document content.** No page text, text deltas, prompts,
image or document bytes, upload file names, PDF passwords or API keys. Log counts, sizes, ids, codes
and durations instead (``pages=3``, ``bytes=12034``, ``vision_tokens=256``). This module enforces
what it can:

* an ``extra`` field whose name is in :data:`FORBIDDEN_FIELDS` (``text``, ``filename``, ``image``,
  ``password``, ``authorization`` ...) is replaced by ``"[redacted]"``;
* ``bytes``/``bytearray``/``memoryview`` values anywhere in ``extra`` become ``"<N bytes>"``;
* string ``extra`` values are cut at :data:`MAX_FIELD_CHARS` characters;
* the formatted message is cut at :data:`MAX_MESSAGE_CHARS` characters;
* URLs (path and query), ``password=`` / ``token=`` pairs and bearer tokens are masked in the message,
  in string ``extra`` values and in exception text (:func:`inkstream.masking.mask_text`), so a webhook
  URL carrying a token, a presigned URL or a Redis URL with a password is never written whole;
* uvicorn's access-log lines keep the path but not the query string (the REST API accepts options,
  including a PDF ``password``, as query parameters): ``/v1/ocr?[query redacted]``.

Messages themselves cannot be inspected for content, so code must not interpolate text or file
names into them (``log.info("page done", extra={"chars": len(text)})``, not ``log.info(text)``);
``tests/ops/test_observability.py`` runs a full request and checks that no line contains the page
text or the upload's file name.

Configuration: :func:`setup_logging` (``INKSTREAM_LOG_LEVEL``, default ``INFO``;
``INKSTREAM_LOG_FORMAT=text`` for a human-readable single-line format during local debugging).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import sys
from typing import Any, TextIO

from opentelemetry import trace

from inkstream import request_id
from inkstream.masking import mask_text

FORBIDDEN_FIELDS = frozenset({
    "text", "page_text", "delta", "text_delta", "content", "prompt", "document", "markdown",
    "filename", "file_name", "upload_name", "path_name",
    "image", "image_bytes", "page_image", "pixels", "data", "chunk", "body",
    "password", "api_key", "authorization", "token_secret",
})
MAX_FIELD_CHARS = 512
MAX_MESSAGE_CHARS = 4096
REDACTED = "[redacted]"

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD_ATTRS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName",
                                                                 "color_message"}  # uvicorn's ANSI copy


def _clean(value: Any, depth: int = 0) -> Any:
    """A JSON-safe copy of ``value`` with bytes replaced by their length and long strings cut."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if isinstance(value, str):
        value = mask_text(value)
        return value if len(value) <= MAX_FIELD_CHARS else value[:MAX_FIELD_CHARS] + "...[cut]"
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if depth >= 3:
        return f"<{type(value).__name__}>"
    if isinstance(value, dict):
        return {str(k): REDACTED if str(k).lower() in FORBIDDEN_FIELDS else _clean(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_clean(v, depth + 1) for v in list(value)[:64]]
    return _clean(str(value), depth + 1)


def _scrub_access_record(record: logging.LogRecord) -> None:
    """uvicorn.access records carry ``(client, method, full_path, http_version, status)`` as args;
    drop the query string of ``full_path``.
    """
    args = record.args
    if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and "?" in args[2]:
        record.args = (args[0], args[1], args[2].split("?", 1)[0] + "?[query redacted]", args[3], args[4])


class ContextFilter(logging.Filter):
    """Stamps ``request_id``, ``trace_id`` and ``span_id`` of the current context on each record
    (at creation time, in the logging thread, so it works for asyncio tasks), and scrubs uvicorn's
    access-log query strings.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Add the context fields to ``record`` (never overwriting ones set via ``extra``); always True."""
        if record.name == "uvicorn.access":
            _scrub_access_record(record)
        if not hasattr(record, "request_id"):
            record.request_id = request_id.current_request_id()
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid and not hasattr(record, "trace_id"):
            record.trace_id = format(ctx.trace_id, "032x")
            record.span_id = format(ctx.span_id, "016x")
        return True


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line (fields and redaction rules in the module docstring)."""

    def __init__(self, service: str):
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        """``record`` as one line of JSON (no trailing newline), ``extra`` fields redacted."""
        message = mask_text(record.getMessage())
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[:MAX_MESSAGE_CHARS] + "...[cut]"
        out: dict[str, Any] = {
            "time": _dt.datetime.fromtimestamp(record.created, _dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "service": self.service,
            "logger": record.name,
            "message": message,
            "request_id": getattr(record, "request_id", None),
        }
        for key in ("trace_id", "span_id"):
            if getattr(record, key, None):
                out[key] = getattr(record, key)
        if record.exc_info and record.exc_info[0] is not None:
            out["exc_type"] = record.exc_info[0].__name__
            out["exc"] = mask_text(self.formatException(record.exc_info))
        for key, value in record.__dict__.items():
            if key in _STANDARD_ATTRS or key in out or key in ("request_id", "trace_id", "span_id"):
                continue
            out[key] = REDACTED if key.lower() in FORBIDDEN_FIELDS else _clean(value)
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"), default=str)


class TextFormatter(logging.Formatter):
    """Human-readable single line for local debugging, with the same redaction of ``extra`` fields."""

    def __init__(self, service: str):
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        """``record`` as ``time level service logger [request id] message key=value...``."""
        extras = {k: (REDACTED if k.lower() in FORBIDDEN_FIELDS else _clean(v))
                  for k, v in record.__dict__.items()
                  if k not in _STANDARD_ATTRS and k not in ("request_id", "trace_id", "span_id")}
        ts = _dt.datetime.fromtimestamp(record.created, _dt.UTC).strftime("%H:%M:%S.%f")[:-3]
        rid = getattr(record, "request_id", None) or "-"
        message = mask_text(record.getMessage())[:MAX_MESSAGE_CHARS]
        line = f"{ts} {record.levelname:<7} {self.service} {record.name} [{rid}] {message}"
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        if record.exc_info and record.exc_info[0] is not None:
            line += "\n" + mask_text(self.formatException(record.exc_info))
        return line


def setup_logging(service: str, level: str | int | None = None, stream: TextIO | None = None,
                  fmt: str | None = None) -> logging.Handler:
    """Route all logging (root logger, incl. uvicorn's and grpc's) to one handler on ``stream``
    (default stderr) with :class:`JsonFormatter` (or :class:`TextFormatter` when ``fmt="text"``).

    ``level``: name or number (default env ``INKSTREAM_LOG_LEVEL`` or ``INFO``). Replaces handlers
    installed by an earlier call, so it is safe to call twice. Returns the handler. uvicorn keeps
    its own handlers unless started with ``log_config=None``.
    """
    level = level or os.environ.get("INKSTREAM_LOG_LEVEL", "INFO")
    fmt = (fmt or os.environ.get("INKSTREAM_LOG_FORMAT", "json")).lower()
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(TextFormatter(service) if fmt == "text" else JsonFormatter(service))
    handler.addFilter(ContextFilter())
    handler._inkstream = True  # type: ignore[attr-defined]  # our mark: a later call replaces this handler
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_inkstream", False):
            root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers = []
        lg.propagate = True
        lg.setLevel(logging.NOTSET)  # follow the root level (an earlier uvicorn config may have raised it)
        lg.disabled = False
    return handler
