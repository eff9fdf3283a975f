"""Continuous-batching engine vs the one-sequence reference, admission, cancel, stop reasons (no gRPC)."""

from __future__ import annotations

import asyncio
import math
import threading
import time

import pytest
import torch

from decoder_service.reference import generate_one
from decoder_service.sampling import SamplingParams
from decoder_service.scheduler import DecodeEngine
from decoder_service.stopping import FinishReason
from inkstream.errors import InternalError, InvalidInput, ResourceExhausted
from inkstream.fair import BATCH, FairQueue, WorkKey
from tests.decoder.conftest import HookedHalf, forced_tokens, vision_tokens

pytestmark = pytest.mark.integration


def _vision(half, i: int) -> torch.Tensor:
    """Different vision-token counts per prompt (6..41), so rows of a batch have different lengths."""
    return vision_tokens(half, 6 + 5 * i, seed=100 + i)


async def _collect(stream):
    ids, text, last = [], "", None
    async for ev in stream:
        ids += ev.token_ids
        text += ev.text
        last = ev
    return ids, text, last


@pytest.fixture
async def engine_factory():
    engines = []

    async def make(half, **kw):
        e = DecodeEngine(half, **kw)
        await e.start()
        engines.append(e)
        return e

    yield make
    for e in engines:
        await e.stop()


@pytest.mark.parametrize("max_running", [8, 3])
async def test_engine_matches_generate_one_for_8_staggered_prompts(half, engine_factory, max_running):
    """8 different prompts arriving 0..70 ms apart; max_running=3 also exercises the waiting queue."""
    params = [SamplingParams(max_new_tokens=12 + 4 * i, repetition_guard=False) for i in range(8)]
    tasks = ["ocr", "markdown"]
    refs = [generate_one(half, half.embed_prompt(_vision(half, i), tasks[i % 2]), params[i]) for i in range(8)]
    assert len({tuple(r.token_ids) for r in refs}) == 8, "prompts should give different outputs"
    eng = await engine_factory(half, max_running=max_running, max_waiting=8, kv_cache_budget_tokens=4096)

    async def one(i):
        await asyncio.sleep(0.01 * i)
        return await _collect(await eng.submit(_vision(half, i), params[i], tasks[i % 2]))

    got = await asyncio.gather(*[one(i) for i in range(8)])
    for (ids, text, last), ref in zip(got, refs, strict=True):
        assert ids == ref.token_ids
        assert text == ref.text
        assert last.finish_reason == ref.finish_reason
        assert last.usage.generated_tokens == len(ids) and last.usage.ttft_s > 0
        # confidence: geometric mean of the tokens' probabilities, as the reference computes them
        assert len(ref.logprobs) == len(ids) and all(lp <= 0.0 for lp in ref.logprobs)
        assert last.usage.confidence == pytest.approx(math.exp(sum(ref.logprobs) / len(ids)), rel=1e-4)
        assert 0.0 < last.usage.confidence <= 1.0
    assert eng.running_count == 0 and eng.kv_used_tokens == 0 and eng._batch.kv.batch_size == 0


async def test_seeded_sampling_matches_reference_in_a_batch(half, engine_factory):
    params = [SamplingParams(max_new_tokens=16, temperature=0.9, top_p=0.95, top_k=50, seed=11 + i,
                             repetition_guard=False)
              for i in range(4)]
    refs = [generate_one(half, half.embed_prompt(_vision(half, i), "ocr"), params[i]).token_ids for i in range(4)]
    eng = await engine_factory(half, max_running=4, kv_cache_budget_tokens=4096)
    got = await asyncio.gather(*[_collect(await eng.submit(_vision(half, i), params[i], "ocr")) for i in range(4)])
    assert [g[0] for g in got] == refs


async def test_cancel_frees_sequence_at_once(half, endless_half, engine_factory):
    eng = await engine_factory(endless_half, max_running=4, kv_cache_budget_tokens=4096)
    long = SamplingParams(max_new_tokens=400, repetition_guard=False)
    a = await eng.submit(_vision(half, 0), long, "ocr")
    b = await eng.submit(_vision(half, 1), long, "ocr")
    got = 0
    async for ev in a:
        got += len(ev.token_ids)
        if got >= 5 and eng.running_count == 2:
            break
    assert eng.running_count == 2
    used_before = eng.kv_used_tokens
    a.cancel()
    # accounting drops at once; the rows' KV tensors are dropped before the next decode step
    assert eng.running_count == 1 and eng.kv_used_tokens < used_before
    # the KV rows themselves go at the start of the model thread's next step
    deadline = time.monotonic() + 5
    while eng._batch.kv.batch_size != 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    assert eng._batch.kv.batch_size == 1
    rest = [ev async for ev in a]
    assert rest[-1].finish_reason is FinishReason.CANCELLED
    b.cancel()
    while eng._batch.kv.batch_size != 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    assert eng.running_count == 0 and eng.kv_used_tokens == 0 and eng._batch.kv.cache is None


async def test_full_engine_raises_resource_exhausted_with_hint(half, endless_half, engine_factory):
    eng = await engine_factory(endless_half, max_running=1, max_waiting=1, kv_cache_budget_tokens=4096)
    p = SamplingParams(max_new_tokens=300, repetition_guard=False)
    s1 = await eng.submit(_vision(half, 0), p, "ocr")
    await s1.__anext__()  # running
    s2 = await eng.submit(_vision(half, 1), p, "ocr")  # waits
    assert eng.waiting_count == 1
    with pytest.raises(ResourceExhausted) as ei:
        await eng.submit(_vision(half, 2), p, "ocr")
    assert ei.value.retry_after_s is not None and ei.value.retry_after_s > 0
    s1.cancel()
    s2.cancel()


async def test_kv_budget_bounds_admission(half, endless_half, engine_factory):
    prompt_len = half.embed_prompt(_vision(half, 0), "ocr").shape[0]
    p = SamplingParams(max_new_tokens=40, repetition_guard=False)
    eng = await engine_factory(endless_half, max_running=8, max_waiting=8, kv_cache_budget_tokens=2 * (prompt_len + 40))
    streams = [await eng.submit(_vision(half, 0), p, "ocr") for _ in range(3)]
    peak = 0

    async def watch():
        nonlocal peak
        while True:
            peak = max(peak, eng.running_count)
            assert eng.kv_reserved_tokens <= eng.kv_cache_budget_tokens
            await asyncio.sleep(0)

    w = asyncio.create_task(watch())
    outs = await asyncio.gather(*[_collect(s) for s in streams])
    w.cancel()
    assert peak == 2 and all(len(o[0]) == 40 for o in outs)
    with pytest.raises(InvalidInput, match="KV-cache budget"):
        await eng.submit(_vision(half, 0), SamplingParams(max_new_tokens=1000), "ocr")


async def test_forced_loop_stops_with_repetition(half, engine_factory):
    looping = HookedHalf(half, hook=forced_tokens([65, 66, 67, 68, 69]))  # 5 tokens again and again
    eng = await engine_factory(looping, max_running=2, kv_cache_budget_tokens=4096)
    guard = SamplingParams(max_new_tokens=200, repetition_ngram=4, repetition_window=64, repetition_repeats=3)
    ids, text, last = await _collect(await eng.submit(_vision(half, 0), guard, "ocr"))
    assert last.finish_reason is FinishReason.REPETITION
    assert len(ids) < 200 and len(ids) <= 4 + 2 * 5 + 1
    off = SamplingParams(max_new_tokens=30, repetition_guard=False)
    ids, _, last = await _collect(await eng.submit(_vision(half, 0), off, "ocr"))
    assert last.finish_reason is FinishReason.LENGTH and len(ids) == 30


async def test_streamed_deltas_are_whole_utf8_characters(half, engine_factory):
    text = "Zürich 東京 🙂."
    eos = min(half.eos_token_ids)
    pattern = half.tokenizer(text, add_special_tokens=False)["input_ids"] + [eos]
    # byte-level BPE: at least one multi-byte character is split across tokens
    assert any("\ufffd" in half.decode_text([t]) for t in pattern)
    prompt_len = half.embed_prompt(_vision(half, 0), "ocr").shape[0]
    forced = HookedHalf(half, hook=forced_tokens(pattern, prompt_len=prompt_len, cycle=False))
    eng = await engine_factory(forced, max_running=2, kv_cache_budget_tokens=4096)
    deltas, last = [], None
    async for ev in await eng.submit(_vision(half, 0), SamplingParams(max_new_tokens=100), "ocr"):
        deltas.append(ev.text)
        last = ev
    assert "".join(deltas) == text and last.finish_reason is FinishReason.STOP
    assert all("\ufffd" not in d for d in deltas)
    assert last.usage.generated_tokens == len(pattern)


async def test_whole_sequence_is_one_event_with_every_token_and_the_text(half, engine_factory):
    """``submit(whole=True)``: the stream yields a single, finishing event holding what the per-step
    events of the same sequence would have held, together."""
    params = SamplingParams(max_new_tokens=24, repetition_guard=False)
    eng = await engine_factory(half, max_running=4, kv_cache_budget_tokens=4096)
    stepwise = [ev async for ev in await eng.submit(_vision(half, 3), params, "ocr")]
    whole = [ev async for ev in await eng.submit(_vision(half, 3), params, "ocr", whole=True)]
    assert len(stepwise) > 1 and len(whole) == 1
    assert whole[0].token_ids == [t for ev in stepwise for t in ev.token_ids]
    assert whole[0].text == "".join(ev.text for ev in stepwise)
    assert whole[0].finish_reason is stepwise[-1].finish_reason is not None
    assert whole[0].usage.generated_tokens == len(whole[0].token_ids)


class _Trimming(HookedHalf):
    """A half whose finish drops the last two generated tokens (an EOS stays last), for every prompt."""

    def finish_state(self, prompt_embeds):
        return int(prompt_embeds.shape[0])

    def finish_tokens(self, state, token_ids):
        ended = token_ids[-1] in self.eos_token_ids
        body = token_ids[:-1] if ended else token_ids
        return [*body[:-2], *token_ids[-1:]] if ended else body[:-2]


async def test_a_whole_sequence_is_delivered_as_the_half_finishes_it(half, engine_factory):
    """``finish_tokens`` corrects a sequence delivered whole (token ids and text); a streamed one is
    delivered as generated (its tokens were final when sent); usage counts what was generated."""
    params = SamplingParams(max_new_tokens=16, repetition_guard=False)
    eng = await engine_factory(_Trimming(half), max_running=4, kv_cache_budget_tokens=4096)
    stepwise = [ev async for ev in await eng.submit(_vision(half, 3), params, "ocr")]
    whole = [ev async for ev in await eng.submit(_vision(half, 3), params, "ocr", whole=True)]
    streamed = [t for ev in stepwise for t in ev.token_ids]
    kept = _Trimming(half).finish_tokens(None, streamed)
    assert len(kept) == len(streamed) - 2
    assert whole[0].token_ids == kept and whole[0].text == half.decode_text(kept)
    assert whole[0].usage.generated_tokens == len(streamed)


class _Replacing(HookedHalf):
    """A half whose finish rewrites a sequence without shortening it: the first generated token
    becomes ``swap`` and, with ``grow``, a copy of it is added after it (an EOS stays last)."""

    def __init__(self, half, swap: int, grow: bool = False):
        super().__init__(half)
        self.swap, self.grow = swap, grow

    def finish_state(self, prompt_embeds):
        return int(prompt_embeds.shape[0])

    def finish_tokens(self, state, token_ids):
        if not token_ids or token_ids[0] in self.eos_token_ids:
            return token_ids
        return [self.swap, *([self.swap] if self.grow else []), *token_ids[1:]]


@pytest.mark.parametrize("grow", [False, True], ids=["same-length", "longer"])
async def test_a_correction_that_does_not_shorten_is_delivered(half, engine_factory, grow):
    """A correction that replaces tokens (same length) or adds some (longer) reaches the caller of a
    whole sequence exactly like one that drops tokens: the served text is the half's finished text."""
    params = SamplingParams(max_new_tokens=16, repetition_guard=False)
    probe = await engine_factory(half, max_running=4, kv_cache_budget_tokens=4096)
    generated = [t for ev in [ev async for ev in await probe.submit(_vision(half, 3), params, "ocr")]
                 for t in ev.token_ids]
    assert generated and generated[0] not in half.eos_token_ids
    replacing = _Replacing(half, next(t for t in range(5, half.vocab_size) if t != generated[0]), grow)
    eng = await engine_factory(replacing, max_running=4, kv_cache_budget_tokens=4096)
    whole = [ev async for ev in await eng.submit(_vision(half, 3), params, "ocr", whole=True)]
    kept = replacing.finish_tokens(None, generated)
    assert len(kept) == len(generated) + int(grow) and kept != generated
    assert whole[0].token_ids == kept and whole[0].text == half.decode_text(kept)
    assert whole[0].usage.generated_tokens == len(generated)


class _Boom(RuntimeError):
    pass


async def test_failed_prefill_fails_only_its_sequence_and_engine_keeps_serving(half, engine_factory):
    bad_len = half.embed_prompt(_vision(half, 3), "ocr").shape[0]
    state = {"decode_fail": False}

    def hook(logits, position_ids):
        if position_ids.shape[1] == bad_len:  # the prefill of prompt 3
            raise _Boom("simulated prefill failure")
        if state["decode_fail"] and position_ids.shape[1] == 1:
            raise _Boom("simulated decode failure")
        return logits

    eng = await engine_factory(HookedHalf(half, hook=hook), max_running=4, kv_cache_budget_tokens=4096)
    p = SamplingParams(max_new_tokens=10, repetition_guard=False)
    good = await eng.submit(_vision(half, 0), p, "ocr")
    bad = await eng.submit(_vision(half, 3), p, "ocr")
    with pytest.raises(InternalError):
        await _collect(bad)
    ids, _, last = await _collect(good)
    assert ids == generate_one(half, half.embed_prompt(_vision(half, 0), "ocr"), p).token_ids
    # a failing decode step fails the rows in the batch, then the engine serves again
    state["decode_fail"] = True
    with pytest.raises(InternalError):
        await _collect(await eng.submit(_vision(half, 1), p, "ocr"))
    assert eng.running_count == 0 and eng._batch.kv.cache is None
    state["decode_fail"] = False
    ids, _, last = await _collect(await eng.submit(_vision(half, 1), p, "ocr"))
    assert ids == generate_one(half, half.embed_prompt(_vision(half, 1), "ocr"), p).token_ids


class _LockCheckedQueue(FairQueue):
    """The engine's waiting queue, failing any read or write made without the engine's lock (the
    model thread pops from it while the event loop appends, counts and snapshots it)."""

    def __init__(self, lock: threading.Condition):
        super().__init__()
        self.lock = lock
        self.unlocked: list[str] = []

    def _check(self, what: str) -> None:
        if not self.lock._is_owned():  # type: ignore[attr-defined]
            self.unlocked.append(what)

    def __iter__(self):
        self._check("iterate")
        return super().__iter__()

    def __len__(self):
        self._check("len")
        return super().__len__()

    def __bool__(self):
        self._check("bool")
        return super().__bool__()

    def push(self, key, item):
        self._check("push")
        super().push(key, item)

    def peek(self, in_service=None):
        self._check("peek")
        return super().peek(in_service)

    def pop(self, in_service=None):
        self._check("pop")
        return super().pop(in_service)

    def remove(self, item):
        self._check("remove")
        return super().remove(item)


async def test_waiting_queue_is_only_touched_under_the_engine_lock(half, endless_half, engine_factory):
    """The scheduler's docstring promises that ``_work`` guards ``_waiting``: submit, count, check
    capacity, cancel and stop (which used to snapshot the queue unlocked while the model thread
    admitted from it) all hold it."""
    eng = await engine_factory(endless_half, max_running=1, max_waiting=4, kv_cache_budget_tokens=4096)
    queue = _LockCheckedQueue(eng._work)
    eng._waiting = queue
    p = SamplingParams(max_new_tokens=300, repetition_guard=False)
    s1 = await eng.submit(_vision(half, 0), p, "ocr")
    await s1.__anext__()  # running: the next ones wait
    waiting = [await eng.submit(_vision(half, i), p, "ocr") for i in (1, 2)]
    assert eng.waiting_count == 2
    eng.check_capacity()
    waiting[0].cancel()
    await eng.stop()
    assert queue.unlocked == []


async def test_waiting_sequences_are_admitted_in_fair_order(half, endless_half, engine_factory):
    """Behind a running row, a long document's queued segments and a small request's one: the small
    request's segment is admitted at the second free row (round-robin), an asynchronous job's after
    every interactive one (priority), whatever the order of arrival.
    """
    eng = await engine_factory(endless_half, max_running=1, max_waiting=8, kv_cache_budget_tokens=4096)
    p = SamplingParams(max_new_tokens=300, repetition_guard=False)
    first = await eng.submit(_vision(half, 0), p, "ocr", key=WorkKey("long"))
    await first.__anext__()  # running: the rest wait
    job = await eng.submit(_vision(half, 1), p, "ocr", key=WorkKey("job", BATCH))
    long = [await eng.submit(_vision(half, 1), p, "ocr", key=WorkKey("long")) for _ in range(3)]
    small = await eng.submit(_vision(half, 1), p, "ocr", key=WorkKey("small"))
    order = []
    running = first
    for _ in range(5):  # free the one row, see who takes it
        running.cancel()
        deadline = time.monotonic() + 10
        while True:
            rows = [s for s in eng._batch.rows if not s.cancelled]
            if rows or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.005)
        assert rows, "no sequence was admitted to the free row"
        streams = {st.seq_id: (name, st) for name, st in [("job", job), ("small", small),
                                                           *((f"long{i}", s) for i, s in enumerate(long))]}
        name, running = streams[rows[0].id]
        order.append(name)
    running.cancel()
    assert order == ["long0", "small", "long1", "long2", "job"], order
