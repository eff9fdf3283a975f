"""Result cache: what is cached, expiry, eviction of the oldest entries."""

from __future__ import annotations

import os
import time

from gateway.output.page import PageResult
from gateway.output.stitch import error_page
from gateway.stores import DirResultStore
from gateway.stores import cache as cache_mod
from gateway.stores.cache import ResultCache, cache_key, cacheable


def test_key_depends_on_everything_that_changes_the_pages():
    base = cache_key("sha", "model", "base", "ocr", [0, 1])
    assert base == cache_key("sha", "model", "base", "ocr", [0, 1])
    variants = [("sha2", "model", "base", "ocr", [0, 1]), ("sha", "model2", "base", "ocr", [0, 1]),
                ("sha", "model", "small", "ocr", [0, 1]), ("sha", "model", "base", "markdown", [0, 1]),
                ("sha", "model", "base", "ocr", [1])]
    for args in variants:
        assert cache_key(*args) != base


def test_only_deterministic_outcomes_are_cacheable():
    ok = PageResult(1, "ok", text="a", finish_reason="stop")
    assert cacheable([ok, error_page(1, "INVALID_ARGUMENT", "unreadable page")])
    assert not cacheable([ok, error_page(1, "UNAVAILABLE", "no replica")])
    assert not cacheable([PageResult(1, "ok", finish_reason="cancelled")])
    assert not cacheable([])


def test_expiry_and_eviction(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "EVICT_EVERY", 1)
    store = DirResultStore(tmp_path)
    c = ResultCache(store, ttl_s=60, max_entries=2)
    pages = [PageResult(1, "ok", text="x", finish_reason="stop")]
    for i, key in enumerate(("a", "b", "c")):
        assert c.put(key, pages)
        path = tmp_path / "cache" / f"{key}.json"
        os.utime(path, (time.time() - 100 + i, time.time() - 100 + i))  # a oldest
    c.put("c", pages)
    assert c.get("a") is None and c.get("b") == pages and c.get("c") == pages
    short = ResultCache(store, ttl_s=0.01, max_entries=10)
    short.put("d", pages)
    time.sleep(0.05)
    assert short.get("d") is None and not (tmp_path / "cache" / "d.json").exists()
