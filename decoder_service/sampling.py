"""Per-sequence next-token selection: greedy by default, temperature / top-k / top-p sampling on request.

The order of the logits processors follows Hugging Face ``generate`` (temperature, then top-k, then
top-p; see transformers ``TemperatureLogitsWarper``, ``TopKLogitsWarper``, ``TopPLogitsWarper``).
Top-p is nucleus sampling (Holtzman et al., 2020, "The Curious Case of Neural Text Degeneration"):
keep the smallest set of most likely tokens whose probability mass reaches ``top_p``.
Each sampled sequence owns a seeded ``torch.Generator`` so that its tokens do not depend on which
other sequences share the batch.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import torch

from inkstream.errors import InvalidInput


@dataclass(frozen=True)
class SamplingParams:
    """How one sequence picks tokens and when it stops.

    ``max_new_tokens``: generated tokens at most (tokens, >= 1). ``temperature``: 0 = greedy
    (argmax); > 0 divides the logits. ``top_p``: nucleus mass in (0, 1]; 0 = off. ``top_k``: keep the
    k most likely tokens; 0 = off. ``seed``: sampling seed; 0 = a random seed. ``repetition_ngram`` /
    ``repetition_window`` / ``repetition_repeats``: the n-gram loop detector (tokens, see
    :mod:`decoder_service.repetition`); ``repetition_guard`` False disables it.
    """

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 0.0
    top_k: int = 0
    seed: int = 0
    repetition_ngram: int = 20
    repetition_window: int = 256
    repetition_repeats: int = 3
    repetition_guard: bool = True

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise InvalidInput(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not 0.0 <= self.temperature < math.inf:  # also rejects NaN; inf would make every token equally likely
            raise InvalidInput(f"temperature must be finite and >= 0 (0 = greedy), got {self.temperature}")
        if not 0.0 <= self.top_p <= 1.0:
            raise InvalidInput(f"top_p must be in (0, 1] or 0 (off), got {self.top_p}")
        if self.top_k < 0:
            raise InvalidInput(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if self.repetition_guard:
            if self.repetition_ngram < 1:
                raise InvalidInput(f"repetition_ngram must be >= 1, got {self.repetition_ngram}")
            if self.repetition_window < self.repetition_ngram * self.repetition_repeats:
                raise InvalidInput(
                    f"repetition_window ({self.repetition_window} tokens) must hold repetition_repeats x "
                    f"repetition_ngram = {self.repetition_ngram * self.repetition_repeats} tokens"
                )

    @property
    def greedy(self) -> bool:
        """True when the next token is the argmax of the logits."""
        return self.temperature <= 0.0


def make_generator(params: SamplingParams) -> torch.Generator | None:
    """A CPU generator seeded with ``params.seed`` (a random seed when 0); None for greedy decoding."""
    if params.greedy:
        return None
    g = torch.Generator(device="cpu")
    g.manual_seed(params.seed or secrets.randbits(63))
    return g


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> list[float]:
    """Natural log-probability of each chosen token under the model's own distribution.

    ``logits`` [B, V] (any float dtype, any device), ``tokens`` [B] long (same device): returns B
    floats ``log softmax(logits[b])[tokens[b]]`` (<= 0), computed in float32 at temperature 1, i.e.
    before any temperature / top-k / top-p processing, so the value measures how sure the model was
    and not how the sequence was sampled. This is what :attr:`decoder_service.sequence.Usage.confidence`
    is built from.
    """
    lsm = torch.log_softmax(logits.float(), dim=-1)
    return lsm.gather(1, tokens.view(-1, 1).to(lsm.device)).view(-1).tolist()


def select_token(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> int:
    """Pick the next token from one position's logits ``[V]`` (float32, any device).

    Greedy: ``argmax`` (ties -> lowest id, as ``torch.argmax``). Sampling: temperature, top-k, top-p,
    then one draw from the renormalised distribution with ``generator`` (on CPU, so a seed gives the
    same tokens on every device).
    """
    if params.greedy:
        return int(torch.argmax(logits).item())
    scores = logits.detach().float().cpu() / params.temperature
    if params.top_k > 0 and params.top_k < scores.numel():
        kth = torch.topk(scores, params.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if 0.0 < params.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=True)
        probs = torch.softmax(sorted_scores, dim=-1)
        # Mass strictly before each token; a token is kept while that mass is below top_p, so the
        # most likely token is always kept.
        before = torch.cumsum(probs, dim=-1) - probs
        drop = before >= params.top_p
        scores = scores.scatter(0, order[drop], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator).item())
