"""Pipeline unit tests against fake encoder / decoder replicas (real grpc.aio servers, no model)."""

from __future__ import annotations

import asyncio
import random
import re

import pytest

from gateway.output.stitch import page_result
from gateway.routing.config import PipelineConfig, RetryPolicy
from gateway.routing.pipeline import Pipeline
from gateway.stores.cache import cacheable
from gateway.types import PageError, PageInput, PipelineOptions
from inkstream import errors
from inkstream.fair import BATCH

from .fakes import FakeDecoder, FakeEncoder, digest, expected_page_text, n_segments, start_server

pytestmark = pytest.mark.timeout(60)


class Cluster:
    """N fake encoders + M fake decoders and a Pipeline over them."""

    def __init__(self):
        self.encoders: list[FakeEncoder] = []
        self.decoders: list[FakeDecoder] = []
        self.servers = []
        self.enc_addrs: list[str] = []
        self.dec_addrs: list[str] = []
        self.pipeline: Pipeline | None = None

    async def start(self, n_enc=1, n_dec=1, enc_delay=0.01, dec_delay=0.01, **cfg):
        for _ in range(n_enc):
            s = FakeEncoder(enc_delay)
            srv, addr = await start_server(s, "encoder")
            self.encoders.append(s), self.servers.append(srv), self.enc_addrs.append(addr)
        for _ in range(n_dec):
            s = FakeDecoder(dec_delay)
            srv, addr = await start_server(s, "decoder")
            self.decoders.append(s), self.servers.append(srv), self.dec_addrs.append(addr)
        cfg.setdefault("retry", RetryPolicy(base_s=0.01, cap_s=0.05, replica_wait_s=2.0))
        self.pipeline = await Pipeline.connect(self.enc_addrs, self.dec_addrs, PipelineConfig(**cfg))
        await self.pipeline.wait_ready(5)
        await self.pipeline.decoders.wait_ready(5, count=n_dec)
        await self.pipeline.encoders.wait_ready(5, count=n_enc)
        return self

    async def stop(self):
        await self.pipeline.close()
        for s in self.servers:
            await s.stop(0)


@pytest.fixture
async def cluster():
    c = Cluster()
    yield c
    await c.stop()


def make_pages(n: int, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [bytes([i % 251]) + rng.randbytes(64) for i in range(n)]


class PageSource:
    """Async iterator of PageInput that records how far ahead of the consumer it was pulled."""

    def __init__(self, images: list[bytes], errors_at: dict[int, PageError] | None = None):
        self.images = images
        self.errors_at = errors_at or {}
        self.pulled = 0

    async def __aiter__(self):
        for i, img in enumerate(self.images):
            self.pulled += 1
            if i in self.errors_at:
                yield PageInput(index=i, image=None, error=self.errors_at[i])
            else:
                yield PageInput(index=i, image=img, width=100, height=200)


async def collect(p: Pipeline, src: PageSource, rid: str = "req-1", consumer_lag: list[int] | None = None):
    outs = []
    async for o in p.run(src.__aiter__(), PipelineOptions(request_id=rid)):
        if consumer_lag is not None:
            consumer_lag.append(src.pulled - len(outs) - 1)
        outs.append(o)
    return outs


def assert_all_pages(outs, images, error_pages=()):
    assert [o.index for o in outs] == list(range(len(images)))
    for o, img in zip(outs, images, strict=True):
        if o.index in error_pages:
            assert o.status == "error"
        else:
            assert o.status == "ok", o.error
            assert o.text == expected_page_text(img)
            assert [s.index for s in o.segments] == list(range(n_segments(img)))


async def test_order_exactly_once_and_bounded_window(cluster):
    c = await cluster.start(n_enc=2, n_dec=2, max_pages_per_request=4, enc_delay=0.02)
    images = make_pages(30)
    lag: list[int] = []
    outs = await collect(c.pipeline, PageSource(images), consumer_lag=lag)
    assert_all_pages(outs, images)
    for img in images:
        assert sum(e.calls[digest(img)] for e in c.encoders) == 1
        assert sum(d.calls[digest(img)] for d in c.decoders) == 1
    # Pages pulled from the source but not yet yielded never exceed the window.
    assert max(lag) <= 4
    # Work was spread over both replicas of each kind (least outstanding).
    assert all(sum(e.calls.values()) > 0 for e in c.encoders)
    assert all(sum(d.calls.values()) > 0 for d in c.decoders)
    # All segments of a page went to one Decode call.
    assert sorted(n for d in c.decoders for n in d.segments_per_call) == sorted(n_segments(i) for i in images)
    assert c.pipeline.admission.pages_in_flight == 0


async def test_a_segment_read_by_its_shape_is_never_sent_to_a_decoder(cluster):
    """A segment the encoder read by its shape (Segment.pre_read: a table's nil dash) keeps that text,
    in its place, and no decoder reads it; a page of such segments alone opens no Decode call."""
    await cluster.start()
    images = [img for img in make_pages(12, seed=9) if n_segments(img) >= 2][:2]
    cluster.encoders[0].pre_read = {1: "-"}
    outs = await collect(cluster.pipeline, PageSource(images))
    for o, img in zip(outs, images, strict=True):
        assert o.status == "ok" and [s.index for s in o.segments] == list(range(n_segments(img)))
        dash = o.segments[1]
        assert (dash.text, dash.tower, dash.finish_reason) == ("-", "shape", "stop")
        assert dash.confidence == pytest.approx(0.9)
        assert [s.text for s in o.segments if s.index != 1] == [t for i, t in enumerate(
            expected_page_text(img).split("\n")) if i != 1]
    assert sum(cluster.decoders[0].segments_per_call) == sum(n_segments(img) - 1 for img in images)
    calls = sum(cluster.decoders[0].calls.values())
    cluster.encoders[0].pre_read = dict.fromkeys(range(64), "-")
    outs = await collect(cluster.pipeline, PageSource(images[:1]), rid="req-2")
    assert outs[0].status == "ok" and outs[0].text == "\n".join("-" * n_segments(images[0]))
    assert sum(cluster.decoders[0].calls.values()) == calls


async def test_encode_overlaps_decode(cluster):
    c = await cluster.start(max_pages_per_request=4, enc_delay=0.05, dec_delay=0.2)
    images = make_pages(8)
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images)
    # Encoder saw several pages at once (window of 4), so it could micro-batch them.
    assert c.encoders[0].max_active >= 2


async def test_out_of_order_completion_still_yields_in_order(cluster):
    c = await cluster.start(max_pages_per_request=6)
    images = make_pages(12, seed=3)
    c.decoders[0].slow_digests[digest(images[0])] = 0.3
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images)


async def test_decode_retried_on_other_replica_without_reencoding(cluster):
    c = await cluster.start(n_dec=2)
    c.decoders[0].fail_all = "UNAVAILABLE"
    images = make_pages(10, seed=1)
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images)
    assert sum(c.decoders[0].calls.values()) >= 1  # it was tried...
    for img in images:
        assert c.encoders[0].calls[digest(img)] == 1  # ...and the encoder never re-ran
        assert c.decoders[1].calls[digest(img)] == 1
    assert c.pipeline.stats.decode.retries >= 1


async def test_resource_exhausted_single_replica_retried(cluster):
    c = await cluster.start()
    images = make_pages(3, seed=2)
    c.decoders[0].fail_first[digest(images[1])] = ("RESOURCE_EXHAUSTED", 1)  # the first call, then healed
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images)
    assert c.decoders[0].calls[digest(images[1])] == 2


async def test_killed_decoder_mid_call(cluster):
    c = await cluster.start(n_dec=2, max_pages_per_request=6)
    images = make_pages(12, seed=4)
    c.decoders[0].hang_digests = {digest(i) for i in images}

    async def kill():
        await c.decoders[0].started.wait()
        await asyncio.sleep(0.05)
        await c.servers[1].stop(0)  # servers: [encoder, decoder0, decoder1]

    task = asyncio.create_task(kill())
    outs = await collect(c.pipeline, PageSource(images))
    await task
    assert_all_pages(outs, images)
    for img in images:
        assert c.encoders[0].calls[digest(img)] == 1
        assert c.decoders[1].calls[digest(img)] == 1


async def test_not_serving_replica_gets_no_work(cluster):
    c = await cluster.start(n_dec=2)
    await c.decoders[0].lifecycle.set_not_serving()
    for _ in range(50):
        if not c.pipeline.decoders.replicas[c.dec_addrs[0]].healthy:
            break
        await asyncio.sleep(0.02)
    images = make_pages(6, seed=5)
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images)
    assert sum(c.decoders[0].calls.values()) == 0


async def test_quarantine_after_internal_on_two_replicas(cluster):
    c = await cluster.start(n_dec=3)
    images = make_pages(5, seed=6)
    poison = digest(images[2])
    for d in c.decoders:
        d.fail_digests[poison] = "INTERNAL"
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images, error_pages={2})
    assert outs[2].error.code == "INTERNAL" and "quarantined" in outs[2].error.message
    # the client's message never names a replica (the tryout saw "127.0.0.1:48053 (incarnation 1): ...")
    assert not any(a in outs[2].error.message for a in c.dec_addrs), outs[2].error.message
    assert sum(d.calls[poison] for d in c.decoders) == 2  # two different replicas, then stop
    assert c.pipeline.stats.decode.quarantined == 1


async def test_invalid_page_is_final_and_input_errors_pass_through(cluster):
    c = await cluster.start()
    images = make_pages(4, seed=7)
    c.encoders[0].fail_digests[digest(images[1])] = "ITEM_INVALID"
    src = PageSource(images, errors_at={3: PageError("INVALID_ARGUMENT", "page 4 could not be rendered")})
    outs = await collect(c.pipeline, src)
    assert_all_pages(outs, images, error_pages={1, 3})
    assert outs[1].error.code == "INVALID_ARGUMENT"
    assert c.encoders[0].calls[digest(images[1])] == 1  # not retried
    assert outs[3].error.message == "page 4 could not be rendered"


async def test_a_page_over_a_replicas_limit_keeps_its_reason_and_is_never_cached(cluster):
    """A page refused for this encoder's pixel limit may be read by another replica or after the limit is
    raised: its error keeps the reason (PAYLOAD_TOO_LARGE) and the result cache does not keep it, while a
    page that is unreadable in itself is still cached.
    """
    c = await cluster.start()
    images = make_pages(3, seed=11)
    c.encoders[0].fail_digests[digest(images[1])] = "ITEM_TOO_LARGE"
    c.encoders[0].fail_digests[digest(images[2])] = "ITEM_INVALID"
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images, error_pages={1, 2})
    assert (outs[1].error.code, outs[1].error.reason) == ("INVALID_ARGUMENT", "PAYLOAD_TOO_LARGE")
    assert page_result(outs[1]).to_dict()["error"]["reason"] == "PAYLOAD_TOO_LARGE"
    assert not cacheable([page_result(o) for o in outs])
    assert cacheable([page_result(outs[0]), page_result(outs[2])])


async def test_a_stale_encoder_info_is_answered_at_once_and_read_again_once(cluster):
    """Found by the breaker: 90 requests at once on a local stack all waited (up to 104 s) and none was
    refused 429 though the bound is 64 pages: each request checks its options against the encoders'
    Info before admission, and once the cached Info was older than ``info_ttl_s`` each made its own
    Info call, queued in the encoder's work window behind the pages. Now a stale Info is answered at
    once while one refresh runs for all."""
    c = await cluster.start(info_ttl_s=0.2)
    first = await c.pipeline.encoder_info()
    calls = c.encoders[0].info_calls
    c.encoders[0].info_delay_s = 1.0  # a busy encoder
    c.encoders[0].revision = "fp2-new"
    await asyncio.sleep(0.3)  # stale now
    t0 = asyncio.get_running_loop().time()
    infos = await asyncio.gather(*(c.pipeline.encoder_info() for _ in range(20)))
    assert asyncio.get_running_loop().time() - t0 < 0.5
    assert all(i == first for i in infos)
    await asyncio.sleep(1.3)  # the one refresh is done
    assert (await c.pipeline.encoder_info()).revision == "fp2-new"
    assert c.encoders[0].info_calls == calls + 1


async def test_decoder_segment_error_is_page_error(cluster):
    c = await cluster.start()
    c.decoders[0].item_error = "INVALID_ARGUMENT"
    images = make_pages(2, seed=8)
    outs = await collect(c.pipeline, PageSource(images))
    assert [o.status for o in outs] == ["error", "error"]
    assert outs[0].error.code == "INVALID_ARGUMENT"


async def test_a_page_error_says_what_happened_to_the_page_not_the_step(cluster):
    """Found by tryout7: page errors read "page 2 encode: ..." / "page 1 decode: ..." (the pipeline's step
    names, which the log keeps); the client's message says what happened to the page in words."""
    c = await cluster.start()
    images = make_pages(3, seed=12)
    c.encoders[0].fail_digests[digest(images[1])] = "ITEM_INVALID"
    c.decoders[0].fail_digests[digest(images[2])] = "INTERNAL"
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images, error_pages={1, 2})
    assert outs[1].error.message.startswith("page 2: its image could not be read: "), outs[1].error.message
    assert outs[2].error.message.startswith("page 3: its text could not be written: "), outs[2].error.message
    for o in outs[1:]:  # "decoder replica" is a word a user knows; the step name "decode" is not
        assert not re.search(r"\b(en|de)code\b", o.error.message), o.error.message


async def test_no_replica_is_page_error_not_hang(cluster):
    c = await cluster.start(retry=RetryPolicy(base_s=0.01, cap_s=0.02, replica_wait_s=0.3))
    await c.servers[1].stop(0)  # the only decoder
    images = make_pages(3, seed=9)
    outs = await collect(c.pipeline, PageSource(images))
    assert [o.status for o in outs] == ["error"] * 3
    assert all(o.error.code == "UNAVAILABLE" for o in outs)


async def test_admission_bound_and_429(cluster):
    c = await cluster.start(max_pages_in_flight=2, max_pages_per_request=4, dec_delay=0.1)
    p = c.pipeline
    async with p.admit("a"), p.admit("b"):
        with pytest.raises(errors.ResourceExhausted) as ei:
            async with p.admit("c"):
                pass
        assert errors.http_status(ei.value) == 429
        assert int(errors.retry_after_header(ei.value)["Retry-After"]) >= 1
        # Admitted requests still complete, sharing the 2 slots (each keeps its reserved one).
        ia, ib = make_pages(5, seed=10), make_pages(5, seed=11)
        oa, ob = await asyncio.gather(collect(p, PageSource(ia), "a"), collect(p, PageSource(ib), "b"))
        assert_all_pages(oa, ia)
        assert_all_pages(ob, ib)
        assert c.encoders[0].max_active <= 2  # never more than the global bound in flight
        assert p.admission.pages_in_flight == 2
    assert p.admission.pages_in_flight == 0
    async with p.admit("c"):
        pass


async def test_abandoned_run_releases_slots(cluster):
    c = await cluster.start(max_pages_in_flight=4, max_pages_per_request=4, dec_delay=0.2)
    p = c.pipeline
    gen = p.run(PageSource(make_pages(10)).__aiter__(), PipelineOptions(request_id="x"))
    first = await gen.__anext__()
    assert first.index == 0 and p.admission.pages_in_flight > 0
    await gen.aclose()
    assert p.admission.pages_in_flight == 0


async def test_encoder_info(cluster):
    c = await cluster.start()
    info = await c.pipeline.encoder_info()
    assert info.model_id == "fake/encoder"
    assert info.default_mode == "base"
    assert info.mode("small").page_long_side_px == 640
    with pytest.raises(errors.InvalidInput, match="base, small"):
        info.mode("huge")


async def test_trace_and_request_id_metadata(cluster):
    c = await cluster.start()
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("req") as span:
        await collect(c.pipeline, PageSource(make_pages(1)), rid="rid-42")
    trace_id = f"{span.get_span_context().trace_id:032x}"
    seen = c.encoders[0].metadata
    assert seen[0]["x-request-id"] == "rid-42"
    assert seen[0]["traceparent"].split("-")[1] == trace_id  # same trace as the caller's span
    assert seen[0]["x-inkstream-priority"] == "interactive"


async def test_the_priority_class_reaches_both_replicas(cluster):
    """An asynchronous job's pages say so, so the replicas' fair queues put them after waiting clients."""
    c = await cluster.start()
    outs = [o async for o in c.pipeline.run(PageSource(make_pages(2)).__aiter__(),
                                            PipelineOptions(request_id="job-7", priority=BATCH))]
    assert [o.status for o in outs] == ["ok", "ok"]
    for md in c.encoders[0].metadata + c.decoders[0].metadata:
        assert md["x-request-id"] == "job-7" and md["x-inkstream-priority"] == "batch"



async def test_persistent_overload_gives_up_with_resource_exhausted(cluster):
    c = await cluster.start(n_dec=2, retry=RetryPolicy(max_attempts=3, base_s=0.01, cap_s=0.02, replica_wait_s=1.0))
    for d in c.decoders:
        d.fail_all = "RESOURCE_EXHAUSTED"
    images = make_pages(2, seed=12)
    outs = await collect(c.pipeline, PageSource(images))
    assert [o.status for o in outs] == ["error", "error"]
    assert all(o.error.code == "RESOURCE_EXHAUSTED" and "3 attempts" in o.error.message for o in outs)
    assert sum(sum(d.calls.values()) for d in c.decoders) == 6  # 3 attempts per page, never more


async def test_ready_reports_missing_replicas(cluster):
    c = await cluster.start()
    assert c.pipeline.ready() == (True, "")
    await c.decoders[0].lifecycle.set_not_serving()
    for _ in range(100):
        ok, reason = c.pipeline.ready()
        if not ok:
            break
        await asyncio.sleep(0.02)
    assert not ok and "decoder" in reason


def test_config_from_mapping():
    from gateway.routing.config import PipelineConfig

    cfg = PipelineConfig.model_validate({"max_pages_per_request": 3, "max_attempts": 5, "retry": {"cap_s": 1.5}})
    assert cfg.max_pages_per_request == 3 and cfg.retry.max_attempts == 5 and cfg.retry.cap_s == 1.5
    with pytest.raises(ValueError, match="unknown pipeline setting.*max_pages_inflight"):
        PipelineConfig.model_validate({"max_pages_inflight": 3})
    with pytest.raises(ValueError, match="max_pages_in_flight must be > 0"):
        PipelineConfig.model_validate({"max_pages_in_flight": 0})


async def test_call_deadline_is_final_page_error(cluster):
    c = await cluster.start(decode_timeout_s=0.3)
    images = make_pages(2, seed=13)
    c.decoders[0].hang_digests = {digest(images[0])}
    outs = await collect(c.pipeline, PageSource(images))
    assert outs[0].status == "error" and outs[0].error.code == "DEADLINE_EXCEEDED"
    assert "page 1: its text could not be written" in outs[0].error.message
    assert c.decoders[0].calls[digest(images[0])] == 1  # not retried
    assert outs[1].status == "ok" and outs[1].text == expected_page_text(images[1])


async def test_real_model_sized_vision_tokens_cross_the_gateway(cluster):
    """DeepSeek-OCR-2's largest page: 1,120 vision tokens x 1,280 hidden in float32 = 5.7 MB per
    segment, above gRPC's default 4 MiB message limit; the gateway's channels must carry it both
    ways (encoder -> gateway -> decoder)."""
    c = await cluster.start()
    c.encoders[0].tokens_shape = (1120, 1280)
    images = make_pages(2, seed=14)
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images)
    assert outs[0].vision_tokens == 1120 * n_segments(images[0])


async def test_message_over_size_limit_is_final_and_explained():
    enc, dec = FakeEncoder(), FakeDecoder()
    enc.tokens_shape = (1120, 1280)  # 5.7 MB per segment
    se, ae = await start_server(enc, "encoder")
    sd, ad = await start_server(dec, "decoder")
    p = await Pipeline.connect([ae], [ad], max_message_bytes=4 * 1024 * 1024)  # gRPC's default limit
    try:
        await p.wait_ready(5)
        images = make_pages(1, seed=15)
        (out,) = await collect(p, PageSource(images))
        assert out.status == "error" and "max_message_bytes" in out.error.message
        assert enc.calls[digest(images[0])] == 1  # deterministic: not retried
    finally:
        await p.close()
        await se.stop(0)
        await sd.stop(0)


async def test_retry_budget_stops_retry_storms(cluster):
    """With the budget nearly spent (gRFC A6 throttling), a transient failure is not retried."""
    c = await cluster.start(n_dec=2, retry_budget_tokens=4.0)
    c.decoders[0].fail_all = c.decoders[1].fail_all = "UNAVAILABLE"
    images = make_pages(3, seed=16)
    outs = await collect(c.pipeline, PageSource(images))
    assert all(o.status == "error" for o in outs)
    assert any("retry budget exhausted" in o.error.message for o in outs)
    # 4 tokens, retries only while more than 2 remain: far fewer calls than 3 pages x 4 attempts.
    assert sum(sum(d.calls.values()) for d in c.decoders) < 3 * 4


async def test_decoder_info_failing_is_not_retried_for_every_page(cluster):
    """While a decoder's Info fails, pages are decoded without its window and Info is tried at most
    once per info_ttl_s, not once per page."""
    c = await cluster.start(max_pages_per_request=4, info_ttl_s=60.0)
    c.decoders[0].info_fails = True
    before = c.decoders[0].info_calls
    images = make_pages(12, seed=5)
    assert_all_pages(await collect(c.pipeline, PageSource(images)), images)
    assert c.decoders[0].info_calls - before <= 1


async def test_decoder_capacity_is_read_again_when_the_replica_comes_back(cluster):
    """A replica restarted with other limits: after it reports SERVING again, its segment window
    is rebuilt from the new Info (and kept when the capacity did not change)."""
    c = await cluster.start(info_ttl_s=60.0)
    dec = c.decoders[0]
    dec.max_running, dec.max_waiting = 6, 2
    images = make_pages(3, seed=6)
    assert_all_pages(await collect(c.pipeline, PageSource(images)), images)
    replica = c.pipeline.decoders.replicas[c.dec_addrs[0]]
    router = c.pipeline.router
    assert router.capacity(replica) == 7 and replica.incarnation == 1  # 6 running + 6 // 4 queued
    dec.max_running = 10  # not seen while the replica stays up: Info is read once per incarnation
    assert_all_pages(await collect(c.pipeline, PageSource(images)), images)
    assert router.capacity(replica) == 7

    dec.max_running = 14
    await dec.lifecycle.set_not_serving()
    for _ in range(100):
        if not replica.healthy:
            break
        await asyncio.sleep(0.02)
    await dec.lifecycle.set_serving()
    await c.pipeline.decoders.wait_ready(5, count=1)
    assert_all_pages(await collect(c.pipeline, PageSource(images)), images)
    assert replica.incarnation == 2 and router.capacity(replica) == 16  # 14 running + 2 (all it accepts)


async def test_pages_go_to_decoders_of_the_encoders_weights(cluster):
    # Mid-rollout: the encoder already runs the new weights, one decoder still the old ones.
    # Tokens of one checkpoint decoded by another give wrong text with no error, so the old
    # decoder must get none of them (and the misroute costs no retry budget).
    c = await cluster.start(n_dec=2)
    c.encoders[0].revision = "new0000000ab"
    c.decoders[0].revision, c.decoders[1].revision = "old0000000cd", "new0000000ab"
    c.pipeline.budget.token_ratio = 0.0  # successes refund nothing: any token spent shows
    images = make_pages(12, seed=21)
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images)
    assert sum(c.decoders[0].calls.values()) == 0
    assert set(c.decoders[1].vision_revisions) == {"new0000000ab"}
    assert c.pipeline.budget.tokens == c.pipeline.budget.max_tokens
    assert c.pipeline.stats.decode.retries == 0


async def test_no_decoder_of_the_encoders_weights_is_a_clear_page_error(cluster):
    c = await cluster.start(retry=RetryPolicy(base_s=0.01, cap_s=0.02, replica_wait_s=0.3))
    c.encoders[0].revision, c.decoders[0].revision = "new0000000ab", "old0000000cd"
    outs = await collect(c.pipeline, PageSource(make_pages(2, seed=22)))
    assert [o.status for o in outs] == ["error", "error"]
    assert all(o.error.code == "UNAVAILABLE" for o in outs)
    assert "revision" in outs[0].error.message and "old0000000cd" in outs[0].error.message
    assert sum(c.decoders[0].calls.values()) == 0


async def test_decoder_refuses_vision_tokens_of_other_weights_itself(cluster):
    # An older gateway, or one whose Info of the replica is stale: the decoder's own check (here
    # emulated by the fake, see decoder_service.convert.check_vision_revision) sends the page on.
    c = await cluster.start(n_dec=2)
    c.encoders[0].revision = "new0000000ab"
    c.decoders[0].revision, c.decoders[1].revision = "old0000000cd", "new0000000ab"
    router = c.pipeline.router

    async def never(stage, route):  # the gateway never learns the decoders' revisions
        return None

    router._ensure_info = never
    c.pipeline.budget.token_ratio = 0.0
    images = make_pages(6, seed=23)
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images)
    assert c.pipeline.budget.tokens == c.pipeline.budget.max_tokens  # a refusal is a misroute, not a failure
    old = next(r for r in c.pipeline.decoders.replicas.values() if r.address == c.dec_addrs[0])
    assert router.view(old).stale  # its Info is read again before the next page goes there


async def test_pages_wait_at_the_gateway_rather_than_overflow_an_encoders_queue(cluster):
    # The encoder holds max_queue_pages + max_batch_size pages (3 here); a burst of 16 pages must
    # not get RESOURCE_EXHAUSTED from it: the surplus waits in the gateway (bounded by admission).
    c = await cluster.start(max_pages_per_request=16, enc_delay=0.05)
    c.encoders[0].max_queue_pages, c.encoders[0].max_batch_size = 2, 1
    images = make_pages(16, seed=24)
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images)
    assert c.encoders[0].max_active <= 2
    replica = next(iter(c.pipeline.encoders.replicas.values()))
    assert c.pipeline.router.capacity(replica) == 2  # two batches of one page
    assert c.pipeline.stats.encode.retries == 0


async def test_the_encoder_window_is_the_one_the_replica_sized_in_time_and_follows_it(cluster):
    # The replica holds 64 + 8 pages but says 3 keep it busy: the gateway keeps no more open there
    # (the rest wait in its fair window), and reads the figure again as the replica re-measures it.
    c = await cluster.start(max_pages_per_request=16, enc_delay=0.02, window_refresh_s=0.05)
    enc = c.encoders[0]
    enc.max_queue_pages, enc.max_batch_size, enc.work_window_pages = 64, 8, 3
    images = make_pages(16, seed=31)
    assert_all_pages(await collect(c.pipeline, PageSource(images)), images)
    assert enc.max_active <= 3
    replica = next(iter(c.pipeline.encoders.replicas.values()))
    assert c.pipeline.router.capacity(replica) == 3
    enc.work_window_pages, enc.max_active = 5, 0
    await asyncio.sleep(0.1)
    images = make_pages(16, seed=32)
    assert_all_pages(await collect(c.pipeline, PageSource(images)), images)
    assert c.pipeline.router.capacity(replica) == 5 and 3 < enc.max_active <= 5


async def test_pages_go_to_encoders_whose_weights_a_ready_decoder_serves(cluster):
    # Rollout: a new encoder is ready before any new decoder. Pages must not be encoded there
    # (they could not be decoded) while an old encoder can take them.
    c = await cluster.start(n_enc=2)
    c.encoders[0].revision, c.encoders[1].revision = "old0000000cd", "new0000000ab"
    c.decoders[0].revision = "old0000000cd"
    for stage in ("encoder", "decoder"):
        for r in list(c.pipeline.router.stages[stage].replicas.values()):
            await c.pipeline.router.ensure_info(stage, r)
    images = make_pages(10, seed=25)
    outs = await collect(c.pipeline, PageSource(images))
    assert_all_pages(outs, images)
    assert sum(c.encoders[1].calls.values()) == 0 and sum(c.encoders[0].calls.values()) == 10
