"""In-process decoder gRPC server with the real deepseek_ocr2 decoder half (tiny random checkpoint:
hidden 64, at most 1,121 vision tokens per segment): boundary checks, overload, cancel, repetition,
health, message-size limits at the real model's largest page, configuration and CLI errors."""

from __future__ import annotations

import asyncio
import math
import threading
import time

import grpc
import pytest
import torch
from grpc_health.v1 import health_pb2, health_pb2_grpc

from decoder_service.config import DecoderConfig, load_decoder_config
from decoder_service.main import main as decoder_main
from decoder_service.reference import generate_one
from decoder_service.sampling import SamplingParams
from decoder_service.server import SERVICE_NAME, build_server
from inkstream.config import ConfigError
from inkstream.errors import retry_after_of
from inkstream.lifecycle import client_options
from inkstream.pb import decoder_pb2, decoder_pb2_grpc, tensor_pb2
from inkstream.wire import to_wire
from tests.decoder.conftest import HookedHalf, forced_tokens

pytestmark = pytest.mark.integration
H = 64  # hidden size of the tiny deepseek_ocr2 checkpoint
MAXV = 1121  # its max_vision_tokens: 256 (global view) + 6 tiles x 144 + 1 view separator


def _cfg(**kw) -> DecoderConfig:
    base = dict(host="127.0.0.1", port=0, max_running=4, max_waiting=4, kv_cache_budget_tokens=4096,
                max_new_tokens=16, max_new_tokens_cap=512, drain_grace_s=1.0)
    base.update(kw)
    return DecoderConfig(**base)


def _req(seg: int, vt: torch.Tensor, max_new: int = 0, **sampling) -> decoder_pb2.DecodeRequest:
    return decoder_pb2.DecodeRequest(segment_id=seg, vision_tokens=to_wire(vt), task="ocr",
                                     sampling=decoder_pb2.SamplingParams(max_new_tokens=max_new, **sampling))


def _vt(n: int = 8, seed: int = 0, dtype=torch.float32) -> torch.Tensor:
    return (torch.randn(n, H, generator=torch.Generator().manual_seed(seed)) * 0.1).to(dtype)


@pytest.fixture
async def served(half):
    assert (half.hidden_size, half.max_vision_tokens) == (H, MAXV)
    bundles = []

    async def start(half_override=None, **kw):
        b = await build_server(_cfg(**kw), half_override or half)
        bundles.append(b)
        ch = grpc.aio.insecure_channel(f"127.0.0.1:{b.port}", options=client_options())
        bundles.append(ch)
        return b, decoder_pb2_grpc.TextDecoderStub(ch)

    yield start
    for b in reversed(bundles):
        if isinstance(b, grpc.aio.Channel):
            await b.close()
        else:
            await b.stop(0)


async def _run(stub, reqs):
    by_seg: dict[int, list] = {}
    async for r in stub.Decode(iter(reqs)):
        by_seg.setdefault(r.segment_id, []).append(r)
    return by_seg


async def test_decode_matches_reference_and_reports_usage(served, half):
    b, stub = await served()
    info = await stub.Info(decoder_pb2.InfoRequest())
    assert info.hidden_size == H and info.max_vision_tokens == half.max_vision_tokens and "ocr" in info.tasks
    assert info.max_running < info.work_window_segments <= info.max_running + info.max_waiting
    ref = generate_one(half, half.embed_prompt(_vt(), "ocr"), SamplingParams(max_new_tokens=20))
    out = await _run(stub, [_req(7, _vt(), max_new=20)])
    rs = out[7]
    assert [t for r in rs for t in r.token_ids] == ref.token_ids
    assert "".join(r.text_delta for r in rs) == ref.text
    last = rs[-1]
    assert last.finish_reason == decoder_pb2.FINISH_REASON_LENGTH and all(r.finish_reason == 0 for r in rs[:-1])
    assert last.usage.generated_tokens == 20 and last.usage.vision_tokens == 8
    assert last.usage.confidence == pytest.approx(math.exp(sum(ref.logprobs) / 20), rel=1e-4)
    assert last.usage.prompt_tokens == half.embed_prompt(_vt(), "ocr").shape[0]


async def test_whole_segment_is_one_response_with_the_deltas_text(served, half):
    """``whole_segment``: each segment answers once, when it finishes, with what its per-step
    responses would have held together (token ids, text, finish reason, usage)."""
    b, stub = await served()
    steps = await _run(stub, [_req(1, _vt(), max_new=20), _req(2, _vt(seed=1), max_new=12)])
    whole = [_req(1, _vt(), max_new=20), _req(2, _vt(seed=1), max_new=12)]
    for r in whole:
        r.whole_segment = True
    got = await _run(stub, whole)
    for seg in (1, 2):
        assert len(steps[seg]) > 1 and len(got[seg]) == 1
        one, last = got[seg][0], steps[seg][-1]
        assert list(one.token_ids) == [t for r in steps[seg] for t in r.token_ids]
        assert one.text_delta == "".join(r.text_delta for r in steps[seg])
        assert one.finish_reason == last.finish_reason == decoder_pb2.FINISH_REASON_LENGTH
        assert one.usage.generated_tokens == last.usage.generated_tokens
        # The two runs may batch the rows differently (a segment joins one step earlier or later:
        # arrival timing), which moves float32 logits in their last bits: confidence to ~1e-6.
        assert one.usage.confidence == pytest.approx(last.usage.confidence, rel=1e-5)


@pytest.mark.parametrize(
    "bad, expect",
    [
        (to_wire(torch.zeros(8, H + 1)), "expected [n_tokens, 64]"),  # wrong hidden size
        (to_wire(torch.zeros(2, 4, H)), "expected [n_tokens, 64]"),  # 3-D
        (tensor_pb2.Tensor(shape=[4, H], dtype=tensor_pb2.DTYPE_UNSPECIFIED, data=b"\0" * 4 * H * 4), "dtype"),
        (tensor_pb2.Tensor(shape=[4, H], dtype=tensor_pb2.DTYPE_FLOAT32, data=b"\0" * 10), "bytes do not match"),
        (to_wire(torch.zeros(MAXV + 1, H)), "expected [n_tokens <= 1121, 64]"),  # more than max_vision_tokens
        (to_wire(torch.full((4, H), float("nan"))), "NaN"),
    ],
)
async def test_bad_vision_tokens_are_invalid_argument_per_segment(served, bad, expect):
    _, stub = await served()
    good = _req(2, _vt(), max_new=3)
    out = await _run(stub, [decoder_pb2.DecodeRequest(segment_id=1, vision_tokens=bad), good])
    assert len(out[1]) == 1 and out[1][0].error.code == "INVALID_ARGUMENT"
    assert expect in out[1][0].error.message
    # the good segment in the same call is unaffected
    assert out[2][-1].finish_reason == decoder_pb2.FINISH_REASON_LENGTH and not out[2][-1].HasField("error")


async def test_unknown_task_and_duplicate_segment_are_invalid_argument(served):
    _, stub = await served()
    reqs = [decoder_pb2.DecodeRequest(segment_id=1, vision_tokens=to_wire(_vt()), task="poetry"),
            _req(2, _vt(), max_new=2), _req(2, _vt(), max_new=2)]
    out = await _run(stub, reqs)
    assert out[1][0].error.code == "INVALID_ARGUMENT" and "poetry" in out[1][0].error.message
    errs = [r for r in out[2] if r.HasField("error")]
    assert len(errs) == 1 and "already used" in errs[0].error.message


async def test_full_decoder_is_resource_exhausted_not_a_hang(served, endless_half):
    b, stub = await served(endless_half, max_running=1, max_waiting=1)

    async def gen():
        for i in range(3):
            yield _req(i, _vt(seed=i), max_new=500, disable_repetition_guard=True)
        await asyncio.sleep(30)  # keep the call open: the server must answer by itself

    call = stub.Decode(gen())
    with pytest.raises(grpc.aio.AioRpcError) as ei:
        async with asyncio.timeout(20):
            async for _ in call:
                pass
    assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "decoder full" in ei.value.details()
    assert (retry_after_of(ei.value) or 0) > 0
    # aborting the call cancelled its running and waiting sequences
    deadline = time.monotonic() + 5
    while (b.engine.running_count or b.engine.waiting_count) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert b.engine.running_count == 0 and b.engine.waiting_count == 0


async def test_client_cancel_frees_sequences_at_once(served, endless_half):
    b, stub = await served(endless_half)
    gate = asyncio.Event()

    async def gen():
        yield _req(1, _vt(seed=1), max_new=500, disable_repetition_guard=True)
        yield _req(2, _vt(seed=2), max_new=500, disable_repetition_guard=True)
        await gate.wait()

    call = stub.Decode(gen())
    seen = 0
    async for r in call:
        seen += len(r.token_ids)
        if seen >= 6 and b.engine.running_count == 2:
            break
    assert b.engine.running_count == 2 and b.engine.kv_used_tokens > 0
    call.cancel()
    deadline = time.monotonic() + 5
    while (b.engine.running_count or b.engine._batch.kv.batch_size) and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    assert b.engine.running_count == 0 and b.engine.kv_used_tokens == 0 and b.engine._batch.kv.cache is None
    gate.set()


async def test_forced_loop_reports_repetition(served, half):
    _, stub = await served(HookedHalf(half, hook=forced_tokens([70, 71, 72])),
                           repetition_ngram=4, repetition_window=32, repetition_repeats=3)
    out = await _run(stub, [_req(1, _vt(), max_new=200)])
    last = out[1][-1]
    assert last.finish_reason == decoder_pb2.FINISH_REASON_REPETITION
    assert 0 < last.usage.generated_tokens < 200


async def test_health_not_serving_until_warmed_up(half):
    gate = threading.Event()
    b = await build_server(_cfg(), HookedHalf(half, gate=gate), wait_ready=False)
    ch = grpc.aio.insecure_channel(f"127.0.0.1:{b.port}")
    try:
        health = health_pb2_grpc.HealthStub(ch)
        for svc in ("", SERVICE_NAME):
            r = await health.Check(health_pb2.HealthCheckRequest(service=svc))
            assert r.status == health_pb2.HealthCheckResponse.NOT_SERVING
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await _run(decoder_pb2_grpc.TextDecoderStub(ch), [_req(1, _vt(), max_new=2)])
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
        gate.set()  # let the warm-up sequence run
        await asyncio.wait_for(b.ready, 30)
        r = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
        assert r.status == health_pb2.HealthCheckResponse.SERVING
        await b.drain()
        assert b.lifecycle.draining
    finally:
        gate.set()
        await ch.close()
        await b.stop(0)


async def test_drain_finishes_in_flight_sequences_and_refuses_new_calls(served, endless_half):
    b, stub = await served(endless_half, drain_grace_s=30.0)
    call = stub.Decode(iter([_req(1, _vt(seed=1), max_new=150, disable_repetition_guard=True)]))
    first = await call.read()  # the sequence is running
    assert first.segment_id == 1 and not first.HasField("error")
    drain = asyncio.create_task(b.drain())
    while not b.lifecycle.draining:
        await asyncio.sleep(0.001)
    with pytest.raises(grpc.aio.AioRpcError) as ei:
        await _run(stub, [_req(2, _vt(seed=2), max_new=4)])
    assert ei.value.code() == grpc.StatusCode.UNAVAILABLE and "draining" in ei.value.details()
    rest = []
    while (r := await call.read()) is not grpc.aio.EOF:
        rest.append(r)
    assert rest[-1].finish_reason == decoder_pb2.FINISH_REASON_LENGTH  # finished, not cancelled
    assert sum(len(r.token_ids) for r in [first, *rest]) == 150
    await asyncio.wait_for(drain, 30)


async def test_segment_sent_after_drain_began_is_refused_alone(served, endless_half):
    """A page's call is open when the replica starts draining: the segment it sends next gets an
    UNAVAILABLE item error (for the gateway to send elsewhere); the running one still finishes."""
    b, stub = await served(endless_half, drain_grace_s=30.0)
    more = asyncio.Event()

    async def gen():
        yield _req(1, _vt(seed=1), max_new=120, disable_repetition_guard=True)
        await more.wait()
        yield _req(2, _vt(seed=2), max_new=4)

    call = stub.Decode(gen())
    first = await call.read()
    assert first.segment_id == 1 and not first.HasField("error")
    drain = asyncio.create_task(b.drain())
    while not b.lifecycle.draining:
        await asyncio.sleep(0.001)
    more.set()
    rest = []
    while (r := await call.read()) is not grpc.aio.EOF:
        rest.append(r)
    refused = [r for r in rest if r.segment_id == 2]
    assert len(refused) == 1 and refused[0].error.code == "UNAVAILABLE" and "draining" in refused[0].error.message
    done = [r for r in rest if r.segment_id == 1]
    assert done[-1].finish_reason == decoder_pb2.FINISH_REASON_LENGTH
    assert sum(len(r.token_ids) for r in [first, *done]) == 120
    assert (await call.code()) == grpc.StatusCode.OK
    await asyncio.wait_for(drain, 30)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
async def test_largest_page_passes_the_message_limit(served, dtype):
    """1,120 vision tokens x 1,280 hidden (the real model's largest page): 5.7 MB fp32, 2.9 MB bf16.
    The tiny model's hidden size is 64, so the segment is rejected for its shape - but by the
    servicer (INVALID_ARGUMENT naming the shape), not by gRPC's message limit (RESOURCE_EXHAUSTED)."""
    _, stub = await served()
    big = torch.zeros(1120, 1280, dtype=dtype)
    out = await _run(stub, [decoder_pb2.DecodeRequest(segment_id=1, vision_tokens=to_wire(big))])
    assert out[1][0].error.code == "INVALID_ARGUMENT" and "expected [n_tokens, 64]" in out[1][0].error.message


async def test_default_grpc_limit_would_reject_the_largest_page(served):
    """Control for the test above: with a 4 MiB limit the fp32 page fails with RESOURCE_EXHAUSTED."""
    _, stub = await served(max_message_bytes=4 * 1024 * 1024)
    big = torch.zeros(1120, 1280)
    with pytest.raises(grpc.aio.AioRpcError) as ei:
        await _run(stub, [decoder_pb2.DecodeRequest(segment_id=1, vision_tokens=to_wire(big))])
    assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_config_env_and_validation(monkeypatch):
    monkeypatch.setenv("INKSTREAM_DECODER__MAX_RUNNING", "32")
    cfg = load_decoder_config(None, port=0)
    assert cfg.max_running == 32 and cfg.port == 0
    monkeypatch.setenv("INKSTREAM_DECODER__MAX_NEW_TOKENS", "99999")
    with pytest.raises(ConfigError, match="max_new_tokens"):
        load_decoder_config(None)


def test_cli_bad_model_dir_exits_2(tmp_path, capsys):
    assert decoder_main(["--model", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert decoder_main(["--model", str(tmp_path)]) == 2
    assert "config.json" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_running: -3\n")
    assert decoder_main(["--model", str(tmp_path), "--config", str(bad)]) == 2
    assert "max_running" in capsys.readouterr().err
