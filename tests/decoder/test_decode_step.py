"""The lean decode step (models/deepseek_ocr2/decode_step.py) on its torch path gives bit-identical
logits and KV cache to transformers' forward, on a left-padded batch whose rows leave and join, and
steps aside for configurations it does not reproduce. (With the few-row kernels of
models/deepseek_ocr2/small_rows.py the results differ by rounding only: tests/decoder/test_small_rows.py.)"""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch

from decoder_service.kv import BatchedKVCache
from decoder_service.prefill import prefill
from models.deepseek_ocr2.decode_step import LeanDecodeStep, lean_step_for
from tests.decoder.conftest import vision_tokens


@pytest.fixture
def torch_path(half):
    """The lean step without the few-row kernels (its bit-identical torch path) for one test."""
    saved, half._lean_step.kernels = half._lean_step.kernels, None
    yield
    half._lean_step.kernels = saved


@contextlib.contextmanager
def _transformers_only(half):
    """Switch the lean step and the sorted experts off: every forward is transformers' own."""
    experts = [layer.mlp.experts for layer in half._text.layers if hasattr(layer.mlp, "experts")]
    saved = [ex.__dict__.pop("forward") for ex in experts]
    lean, half._lean_step = half._lean_step, None
    try:
        yield
    finally:
        half._lean_step = lean
        for ex, fwd in zip(experts, saved, strict=True):
            ex.forward = fwd


def _hf_forward(half, x, mask, pos, cache):
    """Decode step through transformers' text model."""
    with _transformers_only(half):
        return half.forward(x, mask, pos, cache)


def _same_cache(a, b) -> bool:
    pairs = zip(a.layers, b.layers, strict=True)
    return all(torch.equal(x.keys, y.keys) and torch.equal(x.values, y.values) for x, y in pairs)


def test_active_on_the_tiny_checkpoint(half):
    assert isinstance(half._lean_step, LeanDecodeStep)
    assert any(hasattr(layer.mlp, "experts") for layer in half._lean_step.layers)  # the MoE path is exercised


@torch.inference_mode()
def test_bit_identical_to_transformers_on_a_padded_changing_batch(half, torch_path):
    embeds = [half.embed_prompt(vision_tokens(half, n, seed=n), "markdown") for n in (5, 17, 9)]
    kv = BatchedKVCache()
    _, cache, mask = prefill(half, embeds[:2])  # two rows of different lengths: left padding
    kv.add(cache, mask)
    last = torch.tensor([[3], [7]])
    for step in range(6):
        if step == 2:
            _, cache, mask = prefill(half, embeds[2:])  # a row joins
            kv.add(cache, mask)
            last = torch.cat([last, torch.tensor([[11]])])
        if step == 4:
            kv.keep([0, 2])  # a row leaves
            last = last[[0, 2]]
        mask, pos = kv.step_inputs()
        x = half.embed_tokens(last)
        ref_cache = copy.deepcopy(kv.cache)
        ref = _hf_forward(half, x, mask, pos, ref_cache)
        got = half.forward(x, mask, pos, kv.cache)
        kv.commit_step(mask)
        assert torch.equal(got, ref), f"step {step}: max |diff| {(got - ref).abs().max().item()}"
        assert _same_cache(kv.cache, ref_cache)
        last = got.max(dim=-1).indices[:, None]


@contextlib.contextmanager
def _padded_prefill(half):
    """Switch the packed prefill (models/deepseek_ocr2/prefill_step.py) off: prefill is one
    left-padded forward."""
    packed, half._lean_prefill = half._lean_prefill, None
    try:
        yield
    finally:
        half._lean_prefill = packed


@torch.inference_mode()
def test_prefill_with_sorted_experts_is_bit_identical(half):
    embeds = [half.embed_prompt(vision_tokens(half, n, seed=n), "markdown") for n in (30, 12, 21)]
    with _padded_prefill(half):
        logits, cache, mask = prefill(half, embeds)
        with _transformers_only(half):
            ref_logits, ref_cache, ref_mask = prefill(half, embeds)
    assert torch.equal(logits, ref_logits) and torch.equal(mask, ref_mask)
    assert _same_cache(cache, ref_cache)


@torch.inference_mode()
def test_batch_one_with_a_plain_dynamic_cache(half, torch_path):
    e = half.embed_prompt(vision_tokens(half, 6, seed=1), "ocr")
    cache = half.new_cache()
    L = e.shape[0]
    half.forward(e[None], torch.ones(1, L, dtype=torch.long), torch.arange(L)[None], cache)
    ref_cache = copy.deepcopy(cache)
    x, mask, pos = half.embed_tokens(torch.tensor([[5]])), torch.ones(1, L + 1, dtype=torch.long), torch.tensor([[L]])
    assert torch.equal(half.forward(x, mask, pos, cache), _hf_forward(half, x, mask, pos, ref_cache))
    assert _same_cache(cache, ref_cache)


@pytest.mark.parametrize("change", ["experts_eager", "attn_eager", "gqa", "group_routing", "gpu"])
def test_unsupported_configurations_keep_the_transformers_forward(half, change, monkeypatch):
    text = half._text
    cfg = text.config
    moe = next(layer.mlp for layer in text.layers if hasattr(layer.mlp, "experts"))
    if change == "experts_eager":
        monkeypatch.setattr(moe.experts.config, "_experts_implementation", "eager")
    elif change == "attn_eager":
        monkeypatch.setattr(cfg, "_attn_implementation", "eager")
    elif change == "gqa":
        monkeypatch.setattr(cfg, "num_key_value_heads", max(1, cfg.num_attention_heads // 2))
    elif change == "group_routing":
        monkeypatch.setattr(moe.gate, "topk_method", "group_limited_greedy")
    else:
        lm_head = torch.nn.Linear(1, 1, bias=False, device="meta")  # any non-CPU device
        assert lean_step_for(text, lm_head) is None
        return
    assert lean_step_for(text, half._lm_head) is None


def test_a_decode_step_runs_no_import_statement(half, monkeypatch):
    """The step is the engine's hot path: module look-ups belong to load time, not to every step
    (mlp_forward imported transformers' MLP class on each dense block of each step)."""
    import builtins

    _, cache, mask = prefill(half, [half.embed_prompt(vision_tokens(half, 5, seed=3), "ocr")])
    kv = BatchedKVCache()
    kv.add(cache, mask)
    step_mask, pos = kv.step_inputs()
    x = half.embed_tokens(torch.tensor([[7]]))
    imported: list[str] = []
    real_import = builtins.__import__

    def spy(name, *args, **kwargs):
        imported.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", spy)
    with torch.inference_mode():
        half.forward(x, step_mask, pos, kv.cache)
    monkeypatch.undo()
    assert imported == []
