"""One sequence as the engine sees it: its state, the events its consumer receives, and the stream.

``SequenceStream`` is what :meth:`decoder_service.scheduler.DecodeEngine.submit` returns; the
engine's model thread fills ``Seq`` and the event loop delivers :class:`SequenceEvent` s into the
sequence's asyncio queue.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from decoder_service.detok import IncrementalDetokenizer
from decoder_service.sampling import SamplingParams
from decoder_service.stopping import FinishReason, StopCriteria
from inkstream.fair import NO_KEY, WorkKey

if TYPE_CHECKING:
    from decoder_service.scheduler import DecodeEngine


@dataclass
class Usage:
    """Per-sequence accounting: tokens, and TTFT / TPOT in seconds (TTFT from submit, queueing included).

    ``confidence`` in [0, 1]: the geometric mean of the generated tokens' probabilities under the
    model (:func:`decoder_service.sampling.token_logprobs`), ``exp(mean log p)`` over all
    ``generated_tokens`` including the end-of-sequence token; 0.0 when no token was generated.
    """

    prompt_tokens: int
    vision_tokens: int
    generated_tokens: int
    ttft_s: float
    tpot_s: float
    confidence: float = 0.0


@dataclass
class SequenceEvent:
    """One delivery to a sequence's consumer: new ``token_ids`` and ``text`` (whole characters);
    the last event has ``finish_reason`` and ``usage`` set.
    """

    token_ids: list[int]
    text: str
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    #: natural log-probability of each of ``token_ids`` under the model at temperature 1
    #: (:func:`decoder_service.sampling.token_logprobs`); empty when a half corrected a finished sequence
    logprobs: list[float] = field(default_factory=list)


@dataclass(eq=False)
class Seq:
    """Engine-side state of one sequence (identity-compared). Written by the model thread except
    ``cancelled`` / ``closed`` / ``ttft_recorded`` (event loop). Times are ``time.perf_counter()`` s.
    """

    id: int
    embeds: torch.Tensor | None  # [L, H] until prefilled
    prompt_len: int
    n_vision: int
    params: SamplingParams
    max_new: int
    stop: StopCriteria
    detok: IncrementalDetokenizer
    generator: torch.Generator | None
    arrival: float
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    generated: list[int] = field(default_factory=list)
    logprob_sum: float = 0.0  # sum of the generated tokens' natural log-probabilities (model thread)
    token_logprobs: list[float] = field(default_factory=list)  # per generated token, append-only (model thread)
    delivered: int = 0  # generated tokens whose events were published (loop)
    first_t: float = 0.0
    last_t: float = 0.0
    finish: FinishReason | None = None  # written by the worker
    cancelled: bool = False  # written by the loop
    closed: bool = False  # final event delivered (loop)
    ttft_recorded: bool = False  # (loop)
    #: deliver one event when the sequence finishes (all its tokens and text) instead of one per
    #: decode step: a consumer that uses finished sequences only is not woken ~1 x per token (loop)
    whole: bool = False
    #: its request and priority class: its turn in the waiting queue (:mod:`inkstream.fair`)
    key: WorkKey = NO_KEY
    held_tokens: list[int] = field(default_factory=list)  # whole: delivered at the finish (loop)
    held_text: list[str] = field(default_factory=list)
    #: the half's :meth:`~models.base.DecoderHalf.finish_state` of the prompt, taken at prefill (model thread)
    finish_state: Any = None
    #: whole: the (token ids, text) to deliver instead of the held ones, when the half corrected the
    #: finished sequence (:meth:`~models.base.DecoderHalf.finish_tokens`; written by the model thread
    #: before the finishing event is published)
    corrected: tuple[list[int], str] | None = None

    @property
    def reserve(self) -> int:
        """KV cache positions (tokens) reserved for this sequence at admission: prompt + max_new."""
        return self.prompt_len + self.max_new

    def usage(self) -> Usage:
        """Token counts and timings so far: prompt / vision / generated tokens, TTFT and TPOT (seconds)."""
        n = len(self.generated)
        ttft = (self.first_t - self.arrival) if self.first_t else 0.0
        tpot = (self.last_t - self.first_t) / (n - 1) if n > 1 else 0.0
        return Usage(self.prompt_len, self.n_vision, n, ttft, tpot, sequence_confidence(self.logprob_sum, n))


def sequence_confidence(logprob_sum: float, n_tokens: int) -> float:
    """``exp(logprob_sum / n_tokens)`` clipped to [0, 1]: the geometric mean of ``n_tokens`` token
    probabilities whose natural logs sum to ``logprob_sum``; 0.0 for ``n_tokens`` <= 0.
    """
    if n_tokens <= 0:
        return 0.0
    return min(1.0, max(0.0, math.exp(logprob_sum / n_tokens)))


class SequenceStream:
    """Async iterator over one sequence's :class:`SequenceEvent` s; ends after the finishing event.

    Raises the engine's error (e.g. InternalError) if the model step failed. :meth:`cancel` ends the
    sequence with ``FinishReason.CANCELLED`` and frees its KV cache before the next decode step.
    """

    def __init__(self, engine: DecodeEngine, seq: Seq):
        self._engine, self._seq = engine, seq

    @property
    def seq_id(self) -> int:
        """The engine's id of this sequence."""
        return self._seq.id

    @property
    def prompt_tokens(self) -> int:
        """Prompt length in tokens (vision tokens + task prompt tokens)."""
        return self._seq.prompt_len

    def cancel(self) -> None:
        """Cancel (idempotent; no-op once finished)."""
        self._engine.cancel_sequence(self._seq)

    def __aiter__(self) -> SequenceStream:
        return self

    async def __anext__(self) -> SequenceEvent:
        item = await self._seq.queue.get()
        if item is None:
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            raise item
        return item
