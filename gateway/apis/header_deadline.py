"""A deadline for receiving a request's line and headers (slowloris), on uvicorn's h11 protocol.

uvicorn has no such timeout: ``timeout_keep_alive`` covers only the idle time between requests and
is reset by every received byte, so a client sending its headers one byte a second holds a
connection (and a ``limit_concurrency`` slot) for as long as it likes; an ASGI middleware cannot
help, it runs only once the headers are complete. :class:`HeaderDeadlineProtocol` arms a timer when
a connection opens and when the first byte of each later request on it arrives; when the request's
headers are not complete within ``header_timeout_s`` seconds it answers ``408 Request Timeout``
(``Connection: close``) and closes the connection. It is disarmed as soon as the head is parsed, so
uploads and long streaming responses are not affected (the body has its own limit,
``limits.upload_timeout_s``, enforced while it is read: :func:`gateway.apis.rest_http.receive_upload`).

Install: ``uvicorn.Config(app, http=header_deadline_protocol(10.0))``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HeaderDeadlineProtocol", "header_deadline_protocol"]

log = logging.getLogger("inkstream.gateway.http")
_BODY = b"request headers not received in time\n"
TIMEOUT_RESPONSE = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                    b"connection: close\r\ncontent-length: " + str(len(_BODY)).encode() + b"\r\n\r\n" + _BODY)


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head deadline of :attr:`header_timeout_s` seconds."""

    header_timeout_s = 10.0

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._head_cycle: object | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """As uvicorn's, then arm the deadline of the first request's head."""
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        """As uvicorn's; a new request's first byte arms the deadline, a parsed head disarms it."""
        if self._head_deadline is None and (self.cycle is None or self.cycle.response_complete) \
                and self.cycle is self._head_cycle:
            self._arm()
        super().data_received(data)
        if self.cycle is not None and self.cycle is not self._head_cycle:  # a head was parsed
            self._head_cycle = self.cycle
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        """As uvicorn's, and drop the deadline."""
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_deadline = self.loop.call_later(self.header_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _expired(self) -> None:
        self._head_deadline = None
        if self.transport.is_closing():
            return
        log.info("request headers not received within %.0f s: connection closed", self.header_timeout_s,
                 extra={"client": self.client[0] if self.client else ""})
        self.transport.write(TIMEOUT_RESPONSE)
        self.transport.close()


def header_deadline_protocol(header_timeout_s: float) -> type[HeaderDeadlineProtocol]:
    """A :class:`HeaderDeadlineProtocol` subclass with deadline ``header_timeout_s`` seconds (for
    ``uvicorn.Config(http=...)``).
    """
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": float(header_timeout_s)})
