"""Result cache: what is cached, expiry, eviction of the oldest entries."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import time

import httpx

from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from gateway.output.stitch import error_page
from gateway.stores import DirResultStore
from gateway.stores import cache as cache_mod
from gateway.stores.cache import ResultCache, cache_key, cacheable
from inkstream.errors import Unavailable
from inkstream.page_result import PageResult
from tests.gateway_api.conftest import FakePipeline, marked_pdf


def test_key_depends_on_everything_that_changes_the_pages():
    base = cache_key("sha", "model", "base", "ocr", [0, 1])
    assert base == cache_key("sha", "model", "base", "ocr", [0, 1])
    variants = [("sha2", "model", "base", "ocr", [0, 1]), ("sha", "model2", "base", "ocr", [0, 1]),
                ("sha", "model", "small", "ocr", [0, 1]), ("sha", "model", "base", "markdown", [0, 1]),
                ("sha", "model", "base", "ocr", [1])]
    for args in variants:
        assert cache_key(*args) != base
    # the weights: the same model id with other weights (an upgrade) reads other pages
    assert cache_key("sha", "model", "base", "ocr", [0, 1], revision="fp2-aa") != base
    assert cache_key("sha", "model", "base", "ocr", [0, 1], revision="fp2-aa") != \
        cache_key("sha", "model", "base", "ocr", [0, 1], revision="fp2-bb")


async def test_pages_cached_before_a_weights_upgrade_are_not_served_after_it(gw_config):
    fake = FakePipeline()
    info = await fake.encoder_info()
    core = GatewayCore(gw_config, fake)
    core.start()
    app = create_app(gw_config, fake, core)
    pdf = marked_pdf([4, 5])

    async def read() -> str:
        r = await c.post("/v1/ocr", files={"file": ("d.pdf", pdf)}, data={"format": "text"})
        assert r.status_code == 200, r.text
        return r.headers["x-inkstream-cache"]

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        for revision, expected in (("fp2-old", "miss"), ("fp2-old", "hit"), ("fp2-new", "miss"), ("fp2-new", "hit")):
            async def encoder_info(revision=revision):
                return dataclasses.replace(info, revision=revision)
            fake.encoder_info = encoder_info
            assert await read() == expected, revision
    assert fake.pages_run == 4
    await core.close()


def test_only_deterministic_outcomes_are_cacheable():
    ok = PageResult(1, "ok", text="a", finish_reason="stop")
    assert cacheable([ok, error_page(1, "INVALID_ARGUMENT", "unreadable page")])
    assert not cacheable([ok, error_page(1, "UNAVAILABLE", "no replica")])
    # over a limit of the replica or gateway that read it: another one, or a new limit, may read it
    assert not cacheable([ok, error_page(1, "INVALID_ARGUMENT", "over the pixel limit", "PAYLOAD_TOO_LARGE")])
    assert not cacheable([ok, error_page(1, "INVALID_ARGUMENT", "too long", "TOO_LONG_FOR_DEADLINE")])
    assert not cacheable([PageResult(1, "ok", finish_reason="cancelled")])
    assert not cacheable([])


async def test_expiry_and_eviction(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "EVICT_EVERY", 1)
    store = DirResultStore(tmp_path)
    c = ResultCache(store, ttl_s=60, max_entries=2)
    pages = [PageResult(1, "ok", text="x", finish_reason="stop")]
    for i, key in enumerate(("a", "b", "c")):
        assert await c.put(key, pages)
        path = tmp_path / "cache" / f"{key}.json"
        os.utime(path, (time.time() - 100 + i, time.time() - 100 + i))  # a oldest
    await c.put("c", pages)
    assert await c.get("a") is None and await c.get("b") == pages and await c.get("c") == pages
    short = ResultCache(store, ttl_s=0.01, max_entries=10)
    await short.put("d", pages)
    time.sleep(0.05)
    assert await short.get("d") is None and not (tmp_path / "cache" / "d.json").exists()
    await c.close()
    await short.close()


async def test_cache_io_runs_off_the_event_loop(tmp_path):
    """A slow store (a 300-page entry took 1.2 s to write) must not stall the event loop: while a
    write and a lookup are stuck in the store, a coroutine beside them still runs."""
    release = threading.Event()

    class SlowStore(DirResultStore):
        def put(self, name, data, content_type="application/octet-stream"):
            release.wait(10)
            super().put(name, data, content_type)

        def get(self, name):
            release.wait(10)
            return super().get(name)

    c = ResultCache(SlowStore(tmp_path), ttl_s=60)
    pages = [PageResult(1, "ok", text="x", finish_reason="stop")]
    write = asyncio.ensure_future(c.put("k", pages))
    lookup = asyncio.ensure_future(c.get("other"))
    ticks = 0
    for _ in range(5):  # with the store call on the loop, none of these would run before release
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks == 5 and not write.done() and not lookup.done()
    release.set()
    assert await write and await lookup is None
    assert await c.get("k") == pages and (c.hits, c.misses) == (1, 1)
    await c.close()


async def test_an_unreachable_cache_is_skipped_not_raised(tmp_path):
    class DownStore(DirResultStore):
        def get(self, name):
            raise Unavailable("the object store is unreachable")

    c = ResultCache(DownStore(tmp_path), ttl_s=60)
    assert await c.get("k") is None
    assert await c.get("k") is None  # within the back-off: not even tried
    await c.close()
