"""The running batch of a :class:`~decoder_service.scheduler.DecodeEngine` and one engine iteration on it.

:class:`RunningBatch` holds the rows being decoded (sequences, in batch row order) and their
left-padded KV cache (:class:`~decoder_service.kv.BatchedKVCache`). Each engine iteration
(:meth:`RunningBatch.step`) frees cancelled rows, prefills the sequences admitted by
:meth:`RunningBatch.plan` in left-padded groups (:mod:`decoder_service.prefill`), merges their KV
cache into the batch, and runs one batched decode step for every row; finished rows leave right
after it. Only the engine's model thread calls these methods; ``rows`` is replaced, never mutated
in place, so other threads always read a consistent snapshot of it.
"""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass
from typing import Any

import torch

from decoder_service.kv import BatchedKVCache
from decoder_service.prefill import prefill, prefill_groups
from decoder_service.sampling import select_token, token_logprobs
from decoder_service.sequence import Seq
from decoder_service.stopping import FinishReason
from inkstream.fair import FairQueue
from models.base import DecoderHalf

log = logging.getLogger("inkstream.decoder.engine")


@dataclass
class StepResult:
    """One engine iteration: per-token events, rows freed, sequences that failed, seconds taken."""

    events: list[tuple[Seq, list[int], str, FinishReason | None]]
    removed: list[Seq]
    step_s: float
    failed: list[Seq]


class RunningBatch:
    """Rows and KV cache of the running batch (see the module docstring). ``max_running``: rows at
    most; ``kv_cache_budget_tokens``: admission budget over all rows' reservations (tokens).
    """

    def __init__(self, half: DecoderHalf, max_running: int, kv_cache_budget_tokens: int):
        self.half = half
        self.max_running = max_running
        self.kv_cache_budget_tokens = kv_cache_budget_tokens
        self.rows: list[Seq] = []  # row order of the batch; replaced, never mutated in place
        self.kv = BatchedKVCache()

    def reset(self) -> None:
        """Drop every row and the KV cache (the engine stopped)."""
        self.rows = []
        self.kv = BatchedKVCache()

    def plan(self, waiting: FairQueue[Seq]) -> list[Seq]:
        """Pop the sequences of ``waiting`` that fit now, in its fair order (:mod:`inkstream.fair`,
        with each request's rows in the batch as what it has in service: a freed row goes to the
        request holding the fewest), stopping at the first that does not fit (rows:
        ``max_running``; KV budget, see :mod:`decoder_service.scheduler`), so it is not starved;
        called under the engine's lock.
        """
        admits: list[Seq] = []
        live = [s for s in self.rows if not s.cancelled]
        in_service = collections.Counter(s.key.request_id for s in live)
        reserved = sum(s.reserve for s in live)
        longest = max((s.reserve for s in live), default=0)
        while (s := waiting.peek(in_service)) is not None and len(live) + len(admits) < self.max_running:
            n_rows = len(live) + len(admits) + 1
            if (reserved + s.reserve > self.kv_cache_budget_tokens
                    or n_rows * max(longest, s.reserve) > self.kv_cache_budget_tokens):
                break
            waiting.pop(in_service)
            in_service[s.key.request_id] += 1
            admits.append(s)
            reserved += s.reserve
            longest = max(longest, s.reserve)
        return admits

    def step(self, admits: list[Seq]) -> StepResult:
        """One engine iteration: free cancelled rows, prefill ``admits`` (from :meth:`plan`), decode."""
        t0 = time.perf_counter()
        events: list[tuple[Seq, list[int], str, FinishReason | None]] = []
        removed: list[Seq] = []
        failed: list[Seq] = []
        with torch.inference_mode():
            self._keep(lambda s: not s.cancelled, removed)
            live = [s for s in admits if not s.cancelled]
            for group in prefill_groups([s.prompt_len for s in live]):
                self._prefill_group([live[i] for i in group], events, failed)
            removed.extend(s for s in admits if s.finish is not None or s.cancelled or s in failed)
            try:
                if self.rows:
                    self._decode_step(events)
                    self._keep(lambda s: s.finish is None and not s.cancelled, removed)
            except Exception:  # the batch's state is unknown: fail its rows, keep serving
                log.exception("decode step failed", extra={"rows": len(self.rows)})
                failed.extend(self.rows)
                removed.extend(self.rows)
                self.rows = []
                self.kv = BatchedKVCache()
        return StepResult(events, removed, time.perf_counter() - t0, failed)

    def _keep(self, pred: Any, removed: list[Seq]) -> None:
        rows = [i for i, s in enumerate(self.rows) if pred(s)]
        if len(rows) == len(self.rows):
            return
        removed.extend(s for s in self.rows if not pred(s))
        self.kv.keep(rows)
        self.rows = [self.rows[i] for i in rows]

    def _prefill_group(self, group: list[Seq], events: list, failed: list[Seq]) -> None:
        """Prefill ``group`` in one left-padded forward; on an error, retry its sequences one by one
        so that only the sequence that breaks the model fails.
        """
        embeds = [s.embeds for s in group if s.embeds is not None]
        assert len(embeds) == len(group)  # embeddings are kept until a sequence is prefilled
        try:
            logits, cache, mask = prefill(self.half, embeds)
        except Exception:  # isolate the culprit below
            if len(group) > 1:
                for s in group:
                    self._prefill_group([s], events, failed)
                return
            log.exception("prefill failed", extra={"prompt_tokens": group[0].prompt_len})
            failed.append(group[0])
            return
        chosen = [select_token(logits[j], s.params, s.generator) for j, s in enumerate(group)]
        logprobs = token_logprobs(logits, torch.tensor(chosen, dtype=torch.long))
        for j, s in enumerate(group):
            if s.whole:
                s.finish_state = self.half.finish_state(embeds[j])
            s.embeds = None
            self._accept(s, chosen[j], logprobs[j], events)
        rows = [j for j, s in enumerate(group) if s.finish is None]
        if rows:
            self.kv.add(cache, mask, rows)
            self.rows = [*self.rows, *(group[j] for j in rows)]

    def _decode_step(self, events: list) -> None:
        rows = self.rows
        dev = self.kv.mask.device if self.kv.mask is not None else torch.device("cpu")
        last = torch.tensor([[s.generated[-1]] for s in rows], dtype=torch.long, device=dev)
        mask, pos = self.kv.step_inputs()
        logits = self.half.forward(self.half.embed_tokens(last), mask, pos, self.kv.cache)
        self.kv.commit_step(mask)
        greedy = logits.max(dim=-1).indices.tolist()  # = argmax (first of ties), ~3 x faster than torch.argmax on CPU
        chosen = [greedy[i] if s.params.greedy else select_token(logits[i], s.params, s.generator)
                  for i, s in enumerate(rows)]
        logprobs = token_logprobs(logits, torch.tensor(chosen, dtype=torch.long))
        for i, s in enumerate(rows):
            self._accept(s, chosen[i], logprobs[i], events)

    def _accept(self, s: Seq, tok: int, logprob: float, events: list) -> None:
        now = time.perf_counter()
        s.generated.append(tok)
        s.logprob_sum += logprob
        s.token_logprobs.append(logprob)
        if not s.first_t:
            s.first_t = now
        s.last_t = now
        s.finish = s.stop.check(tok, len(s.generated))
        text = s.detok.push([tok])
        if s.finish is not None:
            text += s.detok.flush()
            if s.finish_state is not None:  # any correction counts: one may replace tokens or add some
                kept = self.half.finish_tokens(s.finish_state, s.generated)
                if kept != s.generated:
                    s.corrected = (kept, self.half.decode_text(kept))
        events.append((s, [tok], text, s.finish))
