"""Result cache: page results of a document already read, keyed by what determines them.

Key = SHA-256 over (SHA-256 of the document bytes, model id, weights revision, resolution mode, task,
selected page indices). The revision (the checkpoint's content fingerprint, from the encoders' Info,
:mod:`inkstream.revision`) keeps pages read with the weights before an upgrade from being served after
it, even when the model id stays the same. The output format is not part of the key: every format
is stitched from the same page results. Only deterministic outcomes are cached: pages that are "ok"
and not cancelled, or that failed with INVALID_ARGUMENT because the page itself is unreadable; transient
failures never are, nor a page over a limit of whoever read it (reason PAYLOAD_TOO_LARGE or
TOO_LONG_FOR_DEADLINE: an encoder's pixel or byte limit, a decoder's context or KV-cache budget, the
gateway's limits), which another replica or a new configuration may read.

Two places for the entries: a :class:`gateway.stores.ResultStore` (blobs ``cache/<key>.json``, this
process only; past ``max_entries`` the oldest are removed, checked every :data:`EVICT_EVERY` writes)
or Redis (``inkstream:cache:<key>`` with a Redis TTL, shared by every gateway, so a repeat on another
replica is a hit). Entries live ``ttl_s`` seconds. The cache is best effort: when its engine is
unreachable a lookup is a miss and a write is skipped (logged), for :data:`BACKOFF_S` seconds
without trying, so a request never waits on a dead cache.

Nothing here blocks the event loop: :class:`ResultCache` runs every engine call, and the JSON
(de)serialisation of the pages, on a pool of :data:`THREADS` threads it owns, so a small request's
lookup or write never queues behind a long document's (a :class:`BlobCache` counts its writes and
evicts under its own lock: one eviction at a time). A 300-page entry took 1.2 s to write (mostly
``PageResult.to_dict``) and 0.5 s to read; on the loop that stalled every other request. Pages are
encoded one at a time, so a writer never holds the GIL for a whole entry at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from gateway.stores import ResultStore
from inkstream.errors import PayloadTooLarge, TooLongForDeadline
from inkstream.page_result import PageResult

log = logging.getLogger("inkstream.gateway.cache")

_PREFIX = "cache"
EVICT_EVERY = 32
BACKOFF_S = 10.0
THREADS = 4  #: concurrent lookups and writes (each one engine call and its JSON)


def cache_key(doc_sha256: str, model_id: str, mode: str, task: str, indices: list[int],
              max_new_tokens: int = 0, tenant: str = "", revision: str = "") -> str:
    """Hex key for the page results of one document under one model and options (a token limit
    other than the decoder's default is part of the key), per ``tenant``: a hit would reveal that
    another tenant read the same document, so tenants never share entries. ``revision``: the weights
    revision the pages are read with (``EncoderInfo.revision``; "" when the encoders do not say): new
    weights never get the old weights' pages.
    """
    parts: list[object] = [doc_sha256, model_id, mode, task, indices]
    if tenant and tenant != "default":  # keys of the default tenant stay as before tenants existed
        parts.insert(0, tenant)
    if max_new_tokens:
        parts.append(max_new_tokens)
    if revision:
        parts.append({"revision": revision})
    material = json.dumps(parts, separators=(",", ":"))
    return hashlib.sha256(material.encode()).hexdigest()


#: reasons of INVALID_ARGUMENT page errors that depend on the limits of the replica or gateway that
#: read the page, not on the page alone (:mod:`inkstream.error_classes`)
LIMIT_REASONS = frozenset({PayloadTooLarge.reason, TooLongForDeadline.reason})


def cacheable(pages: list[PageResult]) -> bool:
    """True when every page's outcome would be the same on a retry on any replica (module docstring)."""
    for p in pages:
        if p.status == "ok" and p.finish_reason != "cancelled":
            continue
        if (p.status == "error" and p.error is not None and p.error.code == "INVALID_ARGUMENT"
                and p.error.reason not in LIMIT_REASONS):
            continue
        return False
    return bool(pages)


class CacheBackend(Protocol):
    """Where entries are kept: bytes by key with a lifetime."""

    def get(self, key: str) -> bytes | None:
        """The entry, or None."""

    def put(self, key: str, data: bytes, ttl_s: float) -> None:
        """Store ``data`` under ``key`` for ``ttl_s`` seconds."""

    def delete(self, key: str) -> None:
        """Remove the entry."""


class BlobCache:
    """CacheBackend on a ResultStore (``cache/<key>.json``), at most about ``max_entries`` entries.
    Blocking, thread-safe: the write count and the eviction it triggers are under one lock.
    """

    def __init__(self, store: ResultStore, max_entries: int):
        self.store, self.max_entries, self._puts = store, max_entries, 0
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        """See :meth:`CacheBackend.get`."""
        return self.store.get(f"{_PREFIX}/{key}.json")

    def put(self, key: str, data: bytes, ttl_s: float) -> None:
        """See :meth:`CacheBackend.put` (expiry is checked on read, from the entry's ``expires``)."""
        self.store.put(f"{_PREFIX}/{key}.json", data, "application/json")
        with self._lock:
            self._puts += 1
            if self._puts % EVICT_EVERY == 1 or EVICT_EVERY <= 1:
                names = self.store.names(_PREFIX)
                if len(names) > self.max_entries:
                    names.sort(key=lambda item: item[1])
                    for name, _ in names[: len(names) - self.max_entries]:
                        self.store.delete(name)

    def delete(self, key: str) -> None:
        """See :meth:`CacheBackend.delete`."""
        self.store.delete(f"{_PREFIX}/{key}.json")


class RedisCache:
    """CacheBackend in Redis (``client``: a redis-py client), keys ``<prefix>cache:<key>`` with a TTL."""

    def __init__(self, client: Any, prefix: str = "inkstream:"):
        self.client, self.prefix = client, prefix

    def get(self, key: str) -> bytes | None:
        """See :meth:`CacheBackend.get`."""
        raw = self.client.get(f"{self.prefix}cache:{key}")
        return bytes(raw) if raw is not None else None

    def put(self, key: str, data: bytes, ttl_s: float) -> None:
        """See :meth:`CacheBackend.put`."""
        self.client.set(f"{self.prefix}cache:{key}", data, ex=max(1, int(ttl_s)))

    def delete(self, key: str) -> None:
        """See :meth:`CacheBackend.delete`."""
        self.client.delete(f"{self.prefix}cache:{key}")


class ResultCache:
    """Page-result cache on a :class:`CacheBackend` (or a ResultStore, wrapped in :class:`BlobCache`).
    ``ttl_s`` seconds per entry, ``lookups`` an optional counter (label result=hit|miss).

    :meth:`get` and :meth:`put` are coroutines that run the backend on the cache's own threads (see
    the module docstring); the counters (``hits``, ``misses``) and the back-off after a failure are
    kept on the event loop only. :meth:`close` waits for writes still queued.
    """

    def __init__(self, store: CacheBackend | ResultStore, ttl_s: float, max_entries: int = 10_000,
                 lookups: Any = None):
        self.backend: CacheBackend = (store if isinstance(store, BlobCache | RedisCache)
                                      else BlobCache(store, max_entries))  # type: ignore[arg-type]
        self.lookups = lookups  # OTel counter (inkstream.gateway.cache.lookups), label result=hit|miss
        self.ttl_s = ttl_s
        self.hits = 0
        self.misses = 0
        self._down_until = 0.0
        self._pool = ThreadPoolExecutor(THREADS, thread_name_prefix="result-cache")

    async def _guard(self, what: str, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` on the cache's threads; an engine failure is logged and the cache skipped for
        :data:`BACKOFF_S` seconds.
        """
        if time.monotonic() < self._down_until:
            return None
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        except Exception as exc:  # noqa: BLE001 - the cache never fails a request
            self._down_until = time.monotonic() + BACKOFF_S
            log.warning("result cache %s failed (%s); skipping the cache for %g s", what, exc, BACKOFF_S)
            return None

    async def get(self, key: str) -> list[PageResult] | None:
        """The cached pages for ``key``, or None (missing, expired, unreadable or unreachable)."""
        pages = await self._guard("lookup", self._read, key)
        if pages is not None:
            self.hits += 1
            self._count("hit")
            return pages
        self.misses += 1
        self._count("miss")
        return None

    def _read(self, key: str) -> list[PageResult] | None:
        """(On a cache thread.) The entry's pages; an expired or unreadable entry is removed."""
        raw = self.backend.get(key)
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
            if entry["expires"] > time.time():
                return [PageResult.from_dict(p) for p in entry["pages"]]
        except (ValueError, KeyError, TypeError):
            log.warning("unreadable cache entry %s removed", key)
        self.backend.delete(key)
        return None

    def _count(self, result: str) -> None:
        if self.lookups is not None:
            self.lookups.add(1, {"result": result})

    async def put(self, key: str, pages: list[PageResult]) -> bool:
        """Store ``pages`` under ``key`` when :func:`cacheable`; returns whether it was (to be) stored.
        Returns once a cache thread has written it (or given up: see the module docstring).
        """
        if not cacheable(pages):
            return False
        await self._guard("write", self._write, key, list(pages), time.time() + self.ttl_s)
        return True

    def _write(self, key: str, pages: list[PageResult], expires: float) -> None:
        """(On a cache thread.) Encode ``pages`` one at a time and store the entry."""
        body = ", ".join(json.dumps(p.to_dict()) for p in pages)
        self.backend.put(key, f'{{"expires": {json.dumps(expires)}, "pages": [{body}]}}'.encode(), self.ttl_s)

    async def close(self) -> None:
        """Wait for lookups and writes under way, then stop the cache's threads (shutdown)."""
        await asyncio.to_thread(self._pool.shutdown, True)
