"""Streaming an upload to a request-scoped temporary file with a running byte count.

The body is never held in memory: each chunk is appended to ``<tmpdir>/document`` as it arrives,
counted against the limit (413 as soon as the count passes it, without reading the rest) and hashed
(SHA-256, the result-cache key) on the way.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
from dataclasses import dataclass

from gateway.ingest.sniff import SNIFF_BYTES
from inkstream.errors import PayloadTooLarge, RequestTimeout


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def too_large(limit: int, seen: int | None = None) -> PayloadTooLarge:
    """The 413 error for an upload over ``limit`` bytes (``seen``: bytes declared or read so far)."""
    got = f" ({_mib(seen)} or more)" if seen else ""
    return PayloadTooLarge(f"the document is too large{got}; the limit is {_mib(limit)} ({limit} bytes)")


def upload_too_slow(limit_s: float) -> RequestTimeout:
    """The error for an upload that did not finish within ``limit_s`` seconds (HTTP 408: the client
    was too slow, not the gateway).
    """
    return RequestTimeout(f"the upload did not finish within {limit_s:g} s; send it faster or split the document")


@dataclass(frozen=True)
class UploadedFile:
    """A finished upload: ``path`` on local disk, ``size`` bytes, ``sha256`` hex digest, ``head`` its
    first :data:`SNIFF_BYTES` bytes (for type detection).
    """

    path: pathlib.Path
    size: int
    sha256: str
    head: bytes


class UploadSink:
    """Write an upload chunk by chunk to ``directory/name``; raise 413 once past ``max_bytes``.

    Usage: ``sink.write(chunk)`` for every chunk (bytes), then ``sink.finish()``. Writes are small
    synchronous appends to a local file (page-cache speed); callers on an event loop may call them
    directly. Raises PayloadTooLarge (413) from :meth:`write` as soon as the running count exceeds
    ``max_bytes``; the partial file is removed.
    """

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int, name: str = "document"):
        self.path = pathlib.Path(directory) / name
        self.max_bytes = max_bytes
        self.size = 0
        self._hash = hashlib.sha256()
        self._head = bytearray()
        self._f = open(self.path, "wb")  # noqa: SIM115 - closed in finish()/abort()

    def write(self, chunk: bytes) -> None:
        """Append ``chunk``; raises PayloadTooLarge (413) when the total passes ``max_bytes``."""
        if not chunk:
            return
        self.size += len(chunk)
        if self.size > self.max_bytes:
            self.abort()
            raise too_large(self.max_bytes, self.size)
        if len(self._head) < SNIFF_BYTES:
            self._head += chunk[: SNIFF_BYTES - len(self._head)]
        self._hash.update(chunk)
        self._f.write(chunk)

    def abort(self) -> None:
        """Close and delete the partial file (idempotent)."""
        if not self._f.closed:
            self._f.close()
        self.path.unlink(missing_ok=True)

    def finish(self) -> UploadedFile:
        """Close the file and describe it."""
        self._f.close()
        return UploadedFile(self.path, self.size, self._hash.hexdigest(), bytes(self._head))
