"""inkstream.malloc: the services' fixed glibc mmap threshold and its settings."""

from __future__ import annotations

import sys

import pytest

from inkstream.malloc import DEFAULT_MMAP_THRESHOLD_BYTES, ENV, pin_mmap_threshold


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_default_threshold_is_set(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert pin_mmap_threshold() == DEFAULT_MMAP_THRESHOLD_BYTES


def test_disabled_overridden_or_malformed(monkeypatch):
    monkeypatch.setenv(ENV, "0")
    assert pin_mmap_threshold() == 0
    monkeypatch.setenv(ENV, "4194304")
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")  # the operator's glibc tunable wins
    assert pin_mmap_threshold() == 0
    monkeypatch.setenv(ENV, "lots")
    with pytest.raises(ValueError, match=ENV):
        pin_mmap_threshold()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_arenas_capped_by_default_and_settings_respected(monkeypatch):
    from inkstream.malloc import ARENA_ENV, DEFAULT_ARENA_MAX, limit_arenas, tune

    monkeypatch.delenv(ARENA_ENV, raising=False)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_arenas() == DEFAULT_ARENA_MAX
    assert tune()["arena_max"] == DEFAULT_ARENA_MAX
    monkeypatch.setenv(ARENA_ENV, "0")
    assert limit_arenas() == 0
    monkeypatch.setenv(ARENA_ENV, "4")
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")  # glibc's own tunable wins
    assert limit_arenas() == 0
    monkeypatch.setenv(ARENA_ENV, "two")
    with pytest.raises(ValueError, match=ARENA_ENV):
        limit_arenas()



def test_idle_trim_runs_only_after_the_idle_time():
    import asyncio

    from inkstream.malloc import IdleTrim

    async def scenario() -> tuple[int, int]:
        t = IdleTrim(idle_s=0.05)
        t.idle()
        await asyncio.sleep(0.01)
        t.busy()  # work arrived before the idle time was up: no trim
        await asyncio.sleep(0.1)
        before = t.trims
        t.idle()
        await asyncio.sleep(0.15)
        return before, t.trims

    assert asyncio.run(scenario()) == (0, 1)
