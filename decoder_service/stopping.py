"""When a sequence stops, and why: end-of-sequence, ``max_new_tokens``, repetition loop, cancel.

Shared by the continuous-batching engine and the one-sequence reference so that both apply the
same rules in the same order (EOS first, then the loop detector, then the length limit).
"""

from __future__ import annotations

import enum

from decoder_service.repetition import NGramLoopDetector
from decoder_service.sampling import SamplingParams


class FinishReason(enum.StrEnum):
    """Why a sequence ended (values match the gateway's ``finish_reason`` strings)."""

    STOP = "stop"  # an end-of-sequence token was generated (it is the last token id)
    LENGTH = "length"  # max_new_tokens (or the model's context length) reached
    REPETITION = "repetition"  # the n-gram loop detector fired
    CANCELLED = "cancelled"  # cancelled by the caller or by drain


class StopCriteria:
    """Per-sequence stop rules; :meth:`check` is called once per generated token, in order.

    ``eos_token_ids``: ids that end the sequence; ``max_new_tokens`` is the effective limit after the
    server cap and the context length were applied (tokens).
    """

    def __init__(self, params: SamplingParams, eos_token_ids: set[int], max_new_tokens: int):
        self.eos = frozenset(int(t) for t in eos_token_ids)
        self.max_new_tokens = max_new_tokens
        self.detector = (
            NGramLoopDetector(params.repetition_ngram, params.repetition_window, params.repetition_repeats)
            if params.repetition_guard
            else None
        )

    def check(self, token_id: int, n_generated: int) -> FinishReason | None:
        """``token_id``: the newest token; ``n_generated``: tokens generated so far including it."""
        if token_id in self.eos:
            return FinishReason.STOP
        if self.detector is not None and self.detector.push(token_id):
            return FinishReason.REPETITION
        if n_generated >= self.max_new_tokens:
            return FinishReason.LENGTH
        return None
