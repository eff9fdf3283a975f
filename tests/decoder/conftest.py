"""Fixtures for decoder tests: one CPU thread, the real ``deepseek_ocr2`` decoder half loaded from the
tiny random checkpoint (``tiny_ds_checkpoint`` in tests/conftest.py), and a logits-hook wrapper."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

from models.base import DecoderHalf


@pytest.fixture(autouse=True, scope="session")
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def half(tiny_ds_checkpoint) -> DecoderHalf:
    """DeepseekOcr2DecoderHalf (float32, CPU) of the tiny checkpoint: hidden 64, MoE text model."""
    from models.deepseek_ocr2.decoder_half import DeepseekOcr2DecoderHalf

    torch.set_num_threads(1)
    return DeepseekOcr2DecoderHalf.load(tiny_ds_checkpoint)


def vision_tokens(half: DecoderHalf, n: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Random vision tokens [n, H] (std 0.1, the tiny checkpoint's initializer range)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, half.hidden_size, generator=g) * 0.1).to(dtype)


class HookedHalf(DecoderHalf):
    """Delegates to ``inner``; ``hook(logits [B, V], position_ids [B, T]) -> logits`` edits the output
    (a logits hook), and ``gate`` (a threading.Event) can hold every forward until set."""

    def __init__(self, inner: DecoderHalf, hook: Any = None, gate: threading.Event | None = None):
        self.inner, self.hook, self.gate = inner, hook, gate
        for a in ("family", "model_id", "revision", "hidden_size", "vocab_size", "device", "dtype", "eos_token_ids",
                  "max_vision_tokens", "max_positions", "tasks", "default_task"):
            setattr(self, a, getattr(inner, a))

    @classmethod
    def load(cls, checkpoint_dir, device="cpu", dtype=torch.float32):
        raise NotImplementedError

    def embed_prompt(self, vision_tokens, task, prompt=None):
        return self.inner.embed_prompt(vision_tokens, task, prompt)

    def embed_tokens(self, input_ids):
        return self.inner.embed_tokens(input_ids)

    def new_cache(self):
        return self.inner.new_cache()

    def forward(self, inputs_embeds, attention_mask, position_ids, past_key_values):
        if self.gate is not None:
            assert self.gate.wait(30), "test gate never opened"
        logits = self.inner.forward(inputs_embeds, attention_mask, position_ids, past_key_values)
        return self.hook(logits, position_ids) if self.hook is not None else logits

    def decode_text(self, token_ids):
        return self.inner.decode_text(token_ids)

    def loaded_tensor_names(self):
        return self.inner.loaded_tensor_names()


def forced_tokens(pattern: list[int], prompt_len: int = 0, cycle: bool = True):
    """A logits hook making the token at position ``p`` (counted from ``prompt_len``) be
    ``pattern[(p - prompt_len) % len]``; with ``cycle=False`` only the first ``len(pattern)`` tokens
    are forced. It depends only on the row's own position id, so it acts the same in a batch and alone."""

    def hook(logits: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        out = logits.clone()
        nxt = position_ids[:, -1] + 1 - prompt_len  # index of the token being generated
        for i, k in enumerate(nxt.tolist()):
            if cycle or 0 <= k < len(pattern):
                out[i, pattern[k % len(pattern)]] += 1e4
        return out

    return hook


def suppress_tokens(ids: set[int]):
    """A logits hook that forbids ``ids`` (e.g. EOS, so a sequence runs to max_new_tokens)."""
    banned = sorted(ids)

    def hook(logits: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        out = logits.clone()
        out[:, banned] = float("-inf")
        return out

    return hook


@pytest.fixture(scope="session")
def endless_half(half) -> DecoderHalf:
    """The real half with EOS forbidden: sequences run until max_new_tokens or cancel."""
    return HookedHalf(half, hook=suppress_tokens(half.eos_token_ids))
