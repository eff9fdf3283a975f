"""Reading the rest of a client stream the server refuses, before it sends the refusal.

A grpc.aio client still writing messages to a call the server has already ended gets a bare INTERNAL
("Internal error from Core", ``Failed "execute_batch"``) instead of the server's status (observed with
grpcio 1.85 on the gateway's uploads and on the encoder's page streams during a drain), so a
retryable UNAVAILABLE or RESOURCE_EXHAUSTED would read as a server fault. A refusing handler first
discards what the client sends, bounded in time and bytes, then raises its error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any


async def discard(requests: AsyncIterator[Any], seconds: float, max_bytes: int,
                  size: Callable[[Any], int]) -> None:
    """Read and drop ``requests`` until the client half-closes, ``seconds`` have passed, or more than
    ``max_bytes`` (``size`` of each message, bytes) were read. Never raises for the stream's own end,
    the time limit or a broken stream (the caller is about to fail the call anyway).
    """
    seen = 0
    with contextlib.suppress(TimeoutError, Exception):
        async with asyncio.timeout(seconds):
            async for msg in requests:
                seen += size(msg)
                if seen > max_bytes:
                    return
