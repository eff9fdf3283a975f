"""A page with many segments is decoded through a bounded window, never overflowing the decoder."""

from __future__ import annotations

import asyncio
import dataclasses

import grpc
import torch

from gateway.clients.decoder import decode_segments
from gateway.clients.encoder import VisionSegment
from inkstream import wire
from inkstream.pb import decoder_pb2, decoder_pb2_grpc


class _CountingDecoder(decoder_pb2_grpc.TextDecoderServicer):
    """Answers each segment with its id as text after a short delay; records the most segments that
    were open (received, not yet answered) at once, like a decoder's running + waiting queue."""

    def __init__(self, per_call: int = 200) -> None:
        self.open = 0
        self.peak = 0
        self.per_call = per_call

    async def Decode(self, request_iterator, context):  # gRPC method name
        out: asyncio.Queue = asyncio.Queue()

        async def finish(sid: int) -> None:
            await asyncio.sleep(0.002)
            self.open -= 1
            await out.put(decoder_pb2.DecodeResponse(segment_id=sid, text_delta=f"s{sid}",
                                                     finish_reason=decoder_pb2.FINISH_REASON_STOP))

        pending: set[asyncio.Future] = set()  # referenced until done (the loop holds tasks weakly)

        async def reader() -> None:
            async for req in request_iterator:
                self.open += 1
                self.peak = max(self.peak, self.open)
                fut = asyncio.ensure_future(finish(req.segment_id))
                pending.add(fut)
                fut.add_done_callback(pending.discard)

        task = asyncio.ensure_future(reader())
        answered = 0
        while answered < self.per_call:
            yield await out.get()
            answered += 1
        await task


def _segments(n: int) -> list[VisionSegment]:
    t = wire.to_wire(torch.zeros(3, 4))
    return [VisionSegment(index=i, shape=(3, 4), dtype=t.dtype, data=t.data, box=(0.0, float(i), 10.0, i + 1.0))
            for i in range(n)]


async def _serve(servicer: _CountingDecoder) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    decoder_pb2_grpc.add_TextDecoderServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


async def test_two_hundred_segments_never_more_than_window_open():
    servicer = _CountingDecoder()
    server, port = await _serve(servicer)
    try:
        segs = _segments(200)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            attempt = await decode_segments(ch, segs, task="ocr", max_new_tokens=8, timeout_s=30,
                                            max_segments_in_flight=16)
        assert sorted(attempt.done) == list(range(200))
        assert all(attempt.done[i].text == f"s{i}" for i in range(200))
        assert 1 < servicer.peak <= 16
    finally:
        await server.stop(None)


async def test_pages_sharing_a_replica_never_exceed_its_capacity():
    """Two pages of 100 segments on one replica whose capacity (max_running + max_waiting) is 24:
    the replica's shared slots bound the open segments of both calls together."""
    servicer = _CountingDecoder(per_call=100)
    server, port = await _serve(servicer)
    try:
        slots = asyncio.Semaphore(24)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            got = await asyncio.gather(*[decode_segments(ch, _segments(100), task="ocr", max_new_tokens=8, timeout_s=30,
                                                         max_segments_in_flight=64, replica_slots=slots)
                                         for _ in range(2)])
        assert all(sorted(a.done) == list(range(100)) for a in got)
        assert 1 < servicer.peak <= 24
        assert slots._value == 24  # every slot came back
    finally:
        await server.stop(None)


async def test_failed_call_returns_the_replica_slots_and_leaves_no_task():
    from gateway.clients.calls import CallFailure

    from .fakes import FakeDecoder, start_server

    fake = FakeDecoder()
    fake.fail_all = "UNAVAILABLE"
    server, addr = await start_server(fake, "decoder")
    try:
        segs = _segments(5)
        slots = asyncio.Semaphore(8)
        async with grpc.aio.insecure_channel(addr) as ch:
            try:
                await decode_segments(ch, segs, task="ocr", max_new_tokens=8, timeout_s=10, replica_slots=slots)
            except CallFailure as f:
                assert f.transient
            else:
                raise AssertionError("the call should have failed")
        assert slots._value == 8
        # No task of the client's call is left (the grpc server's own handler tasks come and go).
        assert not [t for t in asyncio.all_tasks() if "decode_segments" in getattr(t.get_coro(), "__qualname__", "")]
    finally:
        await server.stop(None)


async def test_a_decoded_segment_keeps_the_tower_that_read_it():
    """issue #38: the tower the encoder read a segment with (VisionSegment.tower) reaches its decoded
    text (SegmentText.tower), where the gateway picks the calibration of that tower."""
    servicer = _CountingDecoder(per_call=3)
    server, port = await _serve(servicer)
    try:
        segs = [dataclasses.replace(s, tower=t) for s, t in zip(_segments(3), ["latin", "pp", ""], strict=True)]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            attempt = await decode_segments(ch, segs, task="ocr", max_new_tokens=8, timeout_s=30)
        assert [attempt.done[i].tower for i in range(3)] == ["latin", "pp", ""]
    finally:
        await server.stop(None)
