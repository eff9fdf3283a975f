"""Result cache: page results of a document already read, keyed by what determines them.

Key = SHA-256 over (SHA-256 of the document bytes, model id, resolution mode, task, selected page
indices). The output format is not part of the key: every format is stitched from the same page
results. Only deterministic outcomes are cached: pages that are "ok" and not cancelled, or that
failed with INVALID_ARGUMENT (the page itself is unreadable); transient failures never are.
Entries live ``ttl_s`` seconds; past ``max_entries`` the oldest are removed (checked every
:data:`EVICT_EVERY` writes, so the count may overshoot by that many between checks).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

from gateway.stitch import PageResult
from gateway.stores import ResultStore

log = logging.getLogger("inkstream.gateway.cache")

_PREFIX = "cache"
EVICT_EVERY = 32


def cache_key(doc_sha256: str, model_id: str, mode: str, task: str, indices: list[int],
              max_new_tokens: int = 0) -> str:
    """Hex key for the page results of one document under one model and options (a token limit
    other than the decoder's default is part of the key).
    """
    parts: list[object] = [doc_sha256, model_id, mode, task, indices]
    if max_new_tokens:
        parts.append(max_new_tokens)
    material = json.dumps(parts, separators=(",", ":"))
    return hashlib.sha256(material.encode()).hexdigest()


def cacheable(pages: list[PageResult]) -> bool:
    """True when every page's outcome would be the same on a retry (see module docstring)."""
    for p in pages:
        if p.status == "ok" and p.finish_reason != "cancelled":
            continue
        if p.status == "error" and p.error is not None and p.error.code == "INVALID_ARGUMENT":
            continue
        return False
    return bool(pages)


class ResultCache:
    """Page-result cache on a :class:`gateway.stores.ResultStore` (blobs ``cache/<key>.json``).
    ``ttl_s`` seconds per entry, at most about ``max_entries`` entries, ``lookups`` an optional counter.
    """

    def __init__(self, store: ResultStore, ttl_s: float, max_entries: int, lookups: Any = None):
        self.store = store
        self.lookups = lookups  # OTel counter (inkstream.gateway.cache.lookups), label result=hit|miss
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._puts = 0

    def get(self, key: str) -> list[PageResult] | None:
        """The cached pages for ``key``, or None (missing, expired or unreadable)."""
        raw = self.store.get(f"{_PREFIX}/{key}.json")
        if raw is not None:
            try:
                entry = json.loads(raw)
                if entry["expires"] > time.time():
                    self.hits += 1
                    self._count("hit")
                    return [PageResult.from_dict(p) for p in entry["pages"]]
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable cache entry %s removed", key)
            self.store.delete(f"{_PREFIX}/{key}.json")
        self.misses += 1
        self._count("miss")
        return None

    def _count(self, result: str) -> None:
        if self.lookups is not None:
            self.lookups.add(1, {"result": result})

    def put(self, key: str, pages: list[PageResult]) -> bool:
        """Store ``pages`` under ``key`` when :func:`cacheable`; returns whether it was stored."""
        if not cacheable(pages):
            return False
        entry = {"expires": time.time() + self.ttl_s, "pages": [p.to_dict() for p in pages]}
        self.store.put(f"{_PREFIX}/{key}.json", json.dumps(entry).encode())
        self._puts += 1
        if self._puts % EVICT_EVERY == 1 or EVICT_EVERY <= 1:
            self._evict()
        return True

    def _evict(self) -> None:
        names = self.store.names(_PREFIX)
        if len(names) <= self.max_entries:
            return
        names.sort(key=lambda item: item[1])
        for name, _ in names[: len(names) - self.max_entries]:
            self.store.delete(name)
