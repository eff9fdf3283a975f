"""Integration tests of the VisionEncoder gRPC service in-process (test halves, loopback)."""

from __future__ import annotations

import asyncio
import threading

import grpc
import pytest
import torch

from gateway.routing.deadline_fit import DocumentLoad
from inkstream.errors import retry_after_of
from inkstream.pace import ServiceRate
from inkstream.pb import encoder_pb2, tensor_pb2
from inkstream.wire import from_wire
from models.base import TokenColumns
from tests.encoder.doubles import FakeClock, PatchHalf, WideHalf, page_png, solid_png
from tests.encoder.grpc_util import encode_all, requests, running_encoder

pytestmark = pytest.mark.integration


async def test_concurrent_streams_are_batched_and_match_unbatched(patch_half: PatchHalf):
    async with running_encoder(patch_half, wire_dtype="float32", max_batch_size=4, max_wait_ms=5.0) as (_srv, stub, _):
        patch_half.batches.clear()
        patch_half.delay_s = 0.04
        streams = [requests((i, page_png(10 * s + i), "") for i in range(5)) for s in range(3)]
        results = await asyncio.gather(*(encode_all(stub, r) for r in streams))
    assert max(n for _, n in patch_half.batches) > 1, patch_half.batches
    for s, res in enumerate(results):
        for i, resp in res.items():
            assert not resp.HasField("error"), resp.error
            assert resp.n_vision_tokens == 16 and len(resp.segments) == 1
            assert (resp.width, resp.height) == (40, 56) and resp.model_id == "test/patch-tower"
            assert resp.encode_seconds > 0
            seg = resp.segments[0]
            assert (seg.box.x1, seg.box.y1) == (40, 56)
            got = from_wire(seg.vision_tokens, expect_last_dim=24)
            torch.testing.assert_close(got, patch_half.reference(page_png(10 * s + i)))


async def test_bf16_wire_default(patch_half: PatchHalf):
    async with running_encoder(patch_half) as (_srv, stub, _):
        res = await encode_all(stub, requests([(0, page_png(5), "large")]))
    t = res[0].segments[0].vision_tokens
    assert t.dtype == tensor_pb2.DTYPE_BFLOAT16 and list(t.shape) == [64, 24]
    got = from_wire(t)
    assert torch.equal(got, patch_half.reference(page_png(5), "large").to(torch.bfloat16))


async def test_bad_pages_get_per_page_errors_and_others_are_answered(patch_half: PatchHalf):
    async with running_encoder(patch_half) as (_srv, stub, _):
        reqs = requests([(0, page_png(0), ""), (1, b"\x89PNG\r\n\x1a\n garbage", ""), (2, page_png(2), "huge"),
                         (3, b"", ""), (4, page_png(4), "large")])
        res = await encode_all(stub, reqs)
    for i in (0, 4):
        assert not res[i].HasField("error") and res[i].n_vision_tokens in (16, 64)
    for i, text in ((1, "could not be decoded"), (2, "unknown mode 'huge'"), (3, "empty")):
        assert res[i].error.code == "INVALID_ARGUMENT", res[i]
        assert text in res[i].error.message
        assert len(res[i].segments) == 0


class _Stream:
    """A client Encode stream fed page by page."""

    def __init__(self, stub):
        self.queue: asyncio.Queue = asyncio.Queue()
        self.call = stub.Encode(self._gen())

    async def _gen(self):
        while (item := await self.queue.get()) is not None:
            yield item

    async def send(self, index: int, image: bytes, mode: str = "") -> None:
        await self.queue.put(requests([(index, image, mode)])[0])

    async def finish(self) -> dict[int, encoder_pb2.EncodeResponse]:
        await self.queue.put(None)
        out = {}
        while (r := await self.call.read()) is not grpc.aio.EOF:
            out[r.page_index] = r
        return out


async def _until(cond, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def _all_queued_behind_a_held_forward(srv, half: PatchHalf, sends: list, pages: int) -> None:
    """Hold ``half``'s forwards, run ``sends`` (coroutines sending ``pages`` pages in all) until every
    page is queued or inside the held forward, then let the forwards go and wait for the answers:
    the batches are then full whatever the machine's load (``max_batch_size`` pages, the first fewer).
    """
    b = srv.batcher
    half.gate = threading.Event()
    sent = asyncio.gather(*sends)
    try:
        await _until(lambda: b.inflight == pages and b.queued == b.queue_depth and b.queued < pages)
    finally:
        half.gate.set()
    await sent


async def test_queue_full_gives_resource_exhausted_with_retry_info(patch_half: PatchHalf):
    async with running_encoder(patch_half, max_batch_size=1, max_wait_ms=0, max_queue_pages=2) as (srv, stub, _):
        patch_half.gate = threading.Event()
        b = srv.batcher
        try:
            a = _Stream(stub)
            await a.send(0, page_png(0))
            await _until(lambda: b.inflight == 1 and b.queue_depth == 0)  # page 0 inside the gated forward
            await a.send(1, page_png(1))
            await _until(lambda: b.queue_depth == 1)
            other = _Stream(stub)  # opens while there is room
            await other.send(10, page_png(10))
            await _until(lambda: b.queue_depth == 2)  # now full
            # A page beyond the bound on an open stream: per-page RESOURCE_EXHAUSTED with a retry hint.
            await other.send(11, page_png(11))
            first = await other.call.read()
            assert first.page_index == 11 and first.error.code == "RESOURCE_EXHAUSTED"
            assert "retry after" in first.error.message
            # A new stream while full: the call fails with RESOURCE_EXHAUSTED + google.rpc.RetryInfo.
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await encode_all(stub, requests([(0, page_png(9), "")]))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            hint = retry_after_of(err.value)
            assert hint is not None and hint > 0
            patch_half.gate.set()
            rest_a, rest_other = await a.finish(), await other.finish()
            assert sorted(rest_a) == [0, 1] and list(rest_other) == [10]
            assert not any(r.HasField("error") for r in [*rest_a.values(), *rest_other.values()])
        finally:
            patch_half.gate.set()


async def test_one_stream_is_flow_controlled_not_rejected(patch_half: PatchHalf):
    # Window per stream = max_queue_pages = 2 pages (one in the forward, one queued): the rest wait in HTTP/2.
    async with running_encoder(patch_half, max_batch_size=1, max_wait_ms=0, max_queue_pages=2) as (srv, stub, _):
        patch_half.gate = threading.Event()
        try:
            s = _Stream(stub)
            for i in range(8):
                await s.send(i, page_png(i))
            await _until(lambda: srv.batcher.inflight == 2)
            await asyncio.sleep(0.2)
            assert srv.batcher.inflight == 2 and srv.batcher.queue_depth == 1
            patch_half.gate.set()
            res = await s.finish()
        finally:
            patch_half.gate.set()
    assert sorted(res) == list(range(8))
    assert not any(r.HasField("error") for r in res.values()), [r.error for r in res.values()]


async def test_info_reports_model_and_limits(patch_half: PatchHalf):
    async with running_encoder(patch_half, max_batch_size=6, max_wait_ms=7, max_queue_pages=33,
                               max_image_bytes=1_000_000, max_message_bytes=8 * 1024 * 1024,
                               max_image_pixels=3_000_000) as (_srv, stub, _):
        info = await stub.Info(encoder_pb2.InfoRequest())
    assert (info.model_id, info.revision, info.family) == ("test/patch-tower", "seed0", "test-patch")
    assert info.hidden_size == 24 and info.wire_dtype == tensor_pb2.DTYPE_BFLOAT16
    assert info.default_mode == "small"
    assert [(m.name, m.page_long_side_px, m.base_size, m.max_vision_tokens) for m in info.modes] == [
        ("small", 128, 32, 16), ("large", 256, 64, 64)]
    assert (info.max_batch_size, info.max_wait_ms, info.max_queue_pages) == (6, 7, 33)
    assert info.max_message_bytes == 8 * 1024 * 1024 and info.max_image_bytes == 1_000_000
    assert info.max_image_pixels == 3_000_000  # the gateway scales its pages to it
    assert info.feature_columns == 24 and not info.extra_columns  # the double's tokens are all features
    assert info.work_window_pages == 3  # 2 threads + 1 until measured
    assert info.seconds_per_page > 0  # the warm-up's estimate until pages are measured


@pytest.mark.parametrize("batch", [4, 1])
async def test_info_reports_the_warm_ups_seconds_per_page_before_any_page_is_served(patch_half: PatchHalf, batch):
    # A forward pass takes 0.4 s whatever its size: kept full at 4 pages a batch, a page costs
    # 0.1 s of forward (plus its share of preprocessing: none on the fake clock); one page a batch, 0.4 s.
    clock = FakeClock()
    patch_half.clock, patch_half.delay_s = clock, 0.4
    async with running_encoder(patch_half, max_batch_size=batch, max_wait_ms=5.0, clock=clock) as (srv, stub, _):
        info = await stub.Info(encoder_pb2.InfoRequest())
        assert not srv.batcher.pace.measured  # only the warm-up ran
    assert info.seconds_per_page == pytest.approx(0.4 / batch)


async def test_pages_served_one_at_a_time_do_not_make_the_rate_a_latency(patch_half: PatchHalf):
    # A forward pass takes 0.4 s whatever its size (a batch of 4 is one forward): kept full, a page costs
    # ~0.1 s. Pages sent one at a time each took the whole 0.4 s alone, and that latency used to become
    # the replica's reported seconds_per_page, 4x its throughput: a gateway that had not measured the
    # stack itself then refused a document (TOO_LONG_FOR_DEADLINE) that would have been read in time.
    # Times on a clock only the forwards move; the full burst is queued behind a held forward.
    clock = FakeClock()
    patch_half.clock, patch_half.delay_s = clock, 0.4
    async with running_encoder(patch_half, max_batch_size=4, max_wait_ms=5.0, clock=clock) as (srv, stub, _):
        warm = (await stub.Info(encoder_pb2.InfoRequest())).seconds_per_page
        assert 0.1 <= warm < 0.25
        for i in range(6):  # more than ServiceRate's min_units, each page alone in the replica
            await encode_all(stub, requests([(i, page_png(60 + i), "")]))
        alone = (await stub.Info(encoder_pb2.InfoRequest())).seconds_per_page
        assert alone < 0.25, f"{alone:.2f} s a page after single pages: their latency, not the throughput"
        # A gateway that has not measured the stack: 40 pages in 10 s fit at ~0.1-0.25 s a page (not at 0.4).
        DocumentLoad(ServiceRate(), lambda: alone).check("doc", pages=40, time_left_s=10.0)
        # Kept full (four streams of four pages), the measured rate takes over, at its throughput.
        await _all_queued_behind_a_held_forward(srv, patch_half, [
            encode_all(stub, requests([(i, page_png(80 + s * 4 + i), "")])) for s in range(4) for i in range(4)], 16)
        assert srv.batcher.pace.measured
        full = (await stub.Info(encoder_pb2.InfoRequest())).seconds_per_page
    assert 0.05 < full < 0.25, full


class _ColdStartHalf(PatchHalf):
    """Its first preprocessing takes 0.8 s more on its fake clock (lazy set-up), the later ones none."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(seed=0)
        self.clock = clock
        self.cold = True

    def preprocess(self, image, mode):
        if self.cold:
            self.cold = False
            self.clock.advance(0.8)
        return super().preprocess(image, mode)


async def test_the_warm_up_rate_leaves_out_the_first_preprocessings_set_up():
    clock = FakeClock()
    half = _ColdStartHalf(clock)
    half.delay_s = 0.4
    async with running_encoder(half, max_batch_size=4, max_wait_ms=5.0, preprocess_threads=1,
                               clock=clock) as (_srv, stub, _):
        info = await stub.Info(encoder_pb2.InfoRequest())
    assert info.seconds_per_page == pytest.approx(0.1)  # 0.1 s forward + a warm preprocessing (0); cold: 0.9 s


async def test_info_declares_the_halfs_extra_token_columns(patch_half: PatchHalf):
    patch_half.extra_columns = (TokenColumns("copy_class_id_high", 2, "integer", "id // 128"),
                                TokenColumns("copy_class_probability", 2, "probability", "posterior"))
    async with running_encoder(patch_half) as (_srv, stub, _):
        info = await stub.Info(encoder_pb2.InfoRequest())
    assert info.hidden_size == 24 and info.feature_columns == 20
    assert [(c.name, c.count, c.unit, c.description) for c in info.extra_columns] == [
        ("copy_class_id_high", 2, "integer", "id // 128"), ("copy_class_probability", 2, "probability", "posterior")]


async def test_info_sizes_the_work_window_in_time_from_measured_pages(patch_half: PatchHalf):
    # A forward of 0.1 s whatever the batch (a GPU): pages come out far faster than one goes through,
    # so the replica asks for more than its 2 preprocessing threads,
    # never more than it holds (max_queue_pages + max_batch_size).
    # Times are read from a clock only the forwards move (0.1 s each), and the 24 pages are all
    # queued behind a held forward first: the batches (8 pages, the first 1 to 8) and so the figures
    # do not depend on how loaded the machine is.
    clock = FakeClock()
    patch_half.clock, patch_half.delay_s = clock, 0.1
    async with running_encoder(patch_half, max_batch_size=8, max_wait_ms=5.0, max_queue_pages=24,
                               clock=clock) as (srv, stub, _):
        await _all_queued_behind_a_held_forward(srv, patch_half, [
            encode_all(stub, requests([(i, page_png(40 + s * 8 + i), "")])) for s in range(3) for i in range(8)], 24)
        info = await stub.Info(encoder_pb2.InfoRequest())
    assert 0 < info.seconds_per_page < 0.1  # busy seconds per page: several pages per 0.1 s forward
    assert 3 < info.work_window_pages <= 24 + 8


@pytest.mark.parametrize("wire_dtype,torch_dtype,payload", [("float32", torch.float32, 1120 * 1280 * 4),
                                                             ("bfloat16", torch.bfloat16, 1120 * 1280 * 2)])
async def test_real_shape_vision_tokens_roundtrip(wire_dtype, torch_dtype, payload):
    half = WideHalf()
    async with running_encoder(half, wire_dtype=wire_dtype) as (srv, stub, _):
        res = await encode_all(stub, requests([(0, page_png(1), ""), (1, solid_png((10, 200, 30)), "")]))
        limit = srv.config.max_message_bytes
    for i, img in ((0, page_png(1)), (1, solid_png((10, 200, 30)))):
        resp = res[i]
        assert not resp.HasField("error"), resp.error
        assert resp.n_vision_tokens == 1120
        t = resp.segments[0].vision_tokens
        assert len(t.data) == payload and resp.ByteSize() <= limit
        got = from_wire(t, expect_last_dim=1280, max_rows=1120)
        assert got.dtype == torch_dtype
        from encoder_service.images import decode_page

        page = half.preprocess(decode_page(img, max_image_bytes=1 << 30, max_image_pixels=1 << 30), "page")
        want = half.encode_batch([page])[0].segments[0].vision_tokens.to(torch_dtype)
        assert torch.equal(got, want)
    if wire_dtype == "float32":
        assert payload > 4 * 1024 * 1024  # above gRPC's default 4 MiB limit: the limit was raised on purpose


async def test_page_over_message_limit_is_a_clear_per_page_error():
    # fp32 [1120, 1280] = 5.7 MB does not fit a 4 MiB message limit; bf16 (2.9 MB) does.
    async with running_encoder(WideHalf(), wire_dtype="float32", max_message_bytes=4 * 1024 * 1024,
                               max_image_bytes=1_000_000) as (_srv, stub, _):
        res = await encode_all(stub, requests([(0, page_png(1), ""), (1, b"junk", "")]))
    assert res[0].error.code == "INTERNAL" and "max_message_bytes" in res[0].error.message
    assert res[1].error.code == "INVALID_ARGUMENT"


async def test_cancelled_stream_removes_its_queued_pages(patch_half: PatchHalf):
    async with running_encoder(patch_half, max_batch_size=1, max_wait_ms=0) as (srv, stub, _):
        patch_half.batches.clear()
        patch_half.gate = threading.Event()
        try:
            hold = asyncio.ensure_future(encode_all(stub, requests([(0, page_png(0), "")])))
            while not srv.batcher.inflight or srv.batcher.queue_depth:
                await asyncio.sleep(0.01)
            s = _Stream(stub)
            for i in range(3):
                await s.send(i, page_png(100 + i))
            await _until(lambda: srv.batcher.queue_depth == 3)
            s.call.cancel()
            for _ in range(200):
                if srv.batcher.queue_depth == 0:
                    break
                await asyncio.sleep(0.01)
            assert srv.batcher.queue_depth == 0
            patch_half.gate.set()
            await hold
        finally:
            patch_half.gate.set()
        assert sum(n for _, n in patch_half.batches) == 1  # only the held page was encoded
        assert srv.batcher.inflight == 0


async def test_an_interactive_stream_passes_an_asynchronous_jobs_queued_pages(patch_half: PatchHalf):
    """The call's metadata (x-request-id, x-inkstream-priority) orders its pages in the encoder's
    queues: a waiting client's page runs in the forward after the one in progress, not after the
    job's queued pages. (Its page is in the "large" mode, so the forward passes tell them apart.)
    """
    async with running_encoder(patch_half, max_batch_size=1, max_wait_ms=0, preprocess_threads=1) as (_srv, stub, _):
        patch_half.gate = threading.Event()
        patch_half.batches.clear()
        job = asyncio.ensure_future(_stream(stub, requests((i, page_png(50 + i), "small") for i in range(6)),
                                            "job-1", "batch"))
        await asyncio.sleep(0.3)  # job page 0 holds the (gated) forward, pages 1..5 are queued
        sync = asyncio.ensure_future(_stream(stub, requests([(0, page_png(90), "large")]), "sync-1", "interactive"))
        await asyncio.sleep(0.3)
        patch_half.gate.set()
        await asyncio.gather(job, sync)
    sides = [key[1] for key, _ in patch_half.batches]
    assert sides == [32, 64, 32, 32, 32, 32, 32], sides  # small, large: FIFO ran the job's 5 queued pages first


async def _stream(stub, reqs, request_id: str, priority: str) -> None:
    async for resp in stub.Encode(iter(reqs), metadata=[("x-request-id", request_id),
                                                        ("x-inkstream-priority", priority)]):
        assert not resp.HasField("error"), resp.error
