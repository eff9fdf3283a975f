"""inkstream.refused_stream.discard: reads a refused client stream to its end, within a byte budget
and a time limit, and never raises for the stream's own failure."""

from __future__ import annotations

import asyncio

from inkstream.refused_stream import discard


async def _stream(items, delay_s: float = 0.0, fail: bool = False):
    for x in items:
        if delay_s:
            await asyncio.sleep(delay_s)
        yield x
    if fail:
        raise RuntimeError("the client's stream broke")


async def test_reads_to_the_end_or_the_byte_budget():
    read = []

    async def tap(items):
        async for x in _stream(items):
            read.append(x)
            yield x

    await discard(tap([b"ab", b"cd"]), 1.0, 100, len)
    assert read == [b"ab", b"cd"]
    read.clear()
    await discard(tap([b"abc", b"def", b"ghi"]), 1.0, 5, len)  # 6 > 5 bytes: stops after the second
    assert read == [b"abc", b"def"]


async def test_stops_at_the_time_limit_and_swallows_a_broken_stream():
    # 100 messages 0.05 s apart (5 s) and a 0.2 s limit: at most 5 are read, fewer on a loaded
    # machine, never all (counted, not timed: a slow machine cannot fail it).
    read = []

    async def tap(items):
        async for x in _stream(items, delay_s=0.05):
            read.append(x)
            yield x

    await discard(tap([b"x"] * 100), 0.2, 10**6, len)
    assert len(read) <= 5, len(read)
    await discard(_stream([b"x"], fail=True), 1.0, 10**6, len)
