"""Slow, obviously-correct reference decoder: one sequence, no batching, no padding.

The continuous-batching engine (:mod:`decoder_service.scheduler`) must produce exactly the tokens of
:func:`generate_one` for greedy decoding and for seeded sampling; tests compare them token for token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from decoder_service.detok import IncrementalDetokenizer
from decoder_service.sampling import SamplingParams, make_generator, select_token, token_logprobs
from decoder_service.stopping import FinishReason, StopCriteria
from models.base import DecoderHalf


@dataclass
class Generation:
    """Result of one sequence: generated ``token_ids`` (EOS included when it ended the sequence),
    its ``text``, why it stopped, and ``logprobs``: each generated token's natural log-probability
    under the model (:func:`decoder_service.sampling.token_logprobs`), aligned with ``token_ids``.
    """

    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    logprobs: list[float] = field(default_factory=list)


def effective_max_new_tokens(half: DecoderHalf, prompt_len: int, params: SamplingParams) -> int:
    """``params.max_new_tokens`` limited by the context length: ``max_positions - prompt_len`` (tokens)."""
    return max(0, min(params.max_new_tokens, int(half.max_positions) - prompt_len))


@torch.inference_mode()
def generate_one(half: DecoderHalf, prompt_embeds: torch.Tensor, params: SamplingParams) -> Generation:
    """Prefill ``prompt_embeds`` [L, H] (model dtype, on ``half.device``), then decode one token at a
    time with a batch-1 KV cache until EOS, ``max_new_tokens``, or the repetition guard.
    """
    L = int(prompt_embeds.shape[0])
    dev = prompt_embeds.device
    limit = effective_max_new_tokens(half, L, params)
    if limit < 1:
        return Generation([], "", FinishReason.LENGTH)
    stop = StopCriteria(params, half.eos_token_ids, limit)
    gen = make_generator(params)
    cache = half.new_cache()
    logits = half.forward(
        prompt_embeds.unsqueeze(0),
        torch.ones(1, L, dtype=torch.long, device=dev),
        torch.arange(L, device=dev).unsqueeze(0),
        cache,
    )
    ids: list[int] = []
    logprobs: list[float] = []
    while True:
        tok = select_token(logits[0], params, gen)
        ids.append(tok)
        logprobs.extend(token_logprobs(logits[:1], torch.tensor([tok], dtype=torch.long)))
        reason = stop.check(tok, len(ids))
        if reason is not None:
            break
        n = L + len(ids)  # positions after this token is fed
        logits = half.forward(
            half.embed_tokens(torch.tensor([[tok]], dtype=torch.long, device=dev)),
            torch.ones(1, n, dtype=torch.long, device=dev),
            torch.tensor([[n - 1]], dtype=torch.long, device=dev),
            cache,
        )
    detok = IncrementalDetokenizer(half.decode_text)
    return Generation(ids, detok.push(ids) + detok.flush(), reason, logprobs)
