"""Request ids: one id per client request, carried through every encoder and decoder call.

A client may send its own id (``x-request-id`` HTTP header or gRPC metadata); it is kept when it is
1-128 characters of ``[A-Za-z0-9._:-]`` (so it is safe in logs and headers), otherwise a fresh uuid4
hex is used. The current id lives in a :mod:`contextvars` variable, so every log line and span of
the request can carry it (:mod:`inkstream.logs`, :mod:`inkstream.trace_interceptors`).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import uuid
from collections.abc import Iterator
from typing import TypeGuard

REQUEST_ID_KEY = "x-request-id"
REQUEST_ID_ATTR = "inkstream.request_id"
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("inkstream_request_id", default=None)


def new_request_id() -> str:
    """A fresh request id: 32 lowercase hex characters (uuid4)."""
    return uuid.uuid4().hex


def valid_request_id(value: str | None) -> TypeGuard[str]:
    """True when ``value`` is acceptable as a client-supplied request id (see module docstring)."""
    return value is not None and _REQUEST_ID_RE.match(value) is not None


def current_request_id() -> str | None:
    """The request id of the request being handled in this context, or None."""
    return _request_id.get()


def set_request_id(value: str | None) -> contextvars.Token:
    """Make ``value`` the current request id; returns a token for :func:`reset_request_id`."""
    return _request_id.set(value)


def reset_request_id(token: contextvars.Token) -> None:
    """Restore the request id that was current before :func:`set_request_id`."""
    _request_id.reset(token)


@contextlib.contextmanager
def request_scope(request_id: str | None = None) -> Iterator[str]:
    """Context manager: the given (validated) or a new request id is current inside the block."""
    rid = request_id if valid_request_id(request_id) else new_request_id()
    token = _request_id.set(rid)
    try:
        yield rid
    finally:
        _request_id.reset(token)
