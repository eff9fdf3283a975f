"""Batched prefill: the newcomers of one engine iteration run through the model in left-padded groups.

A line-level model (``compact``) sends one short sequence per text line, so a page brings tens to
hundreds of newcomers at once; prefilling each on its own costs one model call per line, most of it
fixed per-call overhead on a CPU. Here consecutive newcomers (FIFO order kept) are packed into groups
of at most ``PREFILL_TOKEN_BUDGET`` padded positions (rows x longest prompt) and each group is one
forward with left padding, ``attention_mask`` 0 on pads and ``position_ids = cumsum(mask) - 1``,
exactly the contract the decode steps already use (models/base.py ``DecoderHalf.forward``). The
group's KV cache then joins the running batch as it is (``BatchedKVCache.add`` with the mask).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from models.base import DecoderHalf, left_pad

# Padded prompt positions per prefill forward: 64 lines of ~100 positions, or one 8k-token page prompt.
PREFILL_TOKEN_BUDGET = 8192


def prefill_groups(prompt_lens: Sequence[int], budget: int = PREFILL_TOKEN_BUDGET) -> list[list[int]]:
    """Split indices 0..n-1 (in order) into runs whose ``len(run) x max(prompt_lens[run])`` stays within
    ``budget`` tokens; a single prompt longer than the budget is a group of its own.
    """
    groups: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i, n in enumerate(prompt_lens):
        if cur and (len(cur) + 1) * max(longest, n) > budget:
            groups.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        groups.append(cur)
    return groups


def prefill(half: DecoderHalf, embeds: Sequence[torch.Tensor]) -> tuple[torch.Tensor, Any, torch.Tensor]:
    """One left-padded forward over prompts ``embeds`` ([L_i, H] each, model dtype and device).
    Returns (last-position logits [b, V] float32, the filled KV cache, attention mask [b, L] int64).
    Errors are those of ``half.forward``.
    """
    packed = half.prefill_packed(list(embeds))  # e.g. deepseek_ocr2's packed prefill (no padding rows)
    if packed is not None:
        return packed
    x, mask, pos = left_pad(list(embeds))
    cache = half.new_cache()
    logits = half.forward(x, mask, pos, cache)
    return logits, cache, mask
