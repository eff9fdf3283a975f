"""Absorbed multi-head latent attention (models/compact/decode/mla.py) equals transformers' DeepseekV2Attention:
same logits for left-padded prefill, chunked prefill after cached positions and decode steps, and the
same KV-cache contents (the serving scheduler's cache code sees no difference)."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import DeepseekV2ForCausalLM, DynamicCache

from models.compact.decode.mla import absorb_mla
from models.compact.model import decoder_config


@pytest.fixture(scope="module")
def pair():
    """(reference LM, absorbed copy) with random weights, fp32, eval mode."""
    torch.manual_seed(0)
    cfg = decoder_config(96, hidden=64, layers=2)
    cfg._attn_implementation = "sdpa"
    ref = DeepseekV2ForCausalLM(cfg).eval()
    fast = copy.deepcopy(ref)
    assert absorb_mla(fast) == 2
    return ref, fast


def _step(lm, x, mask, pos, cache):
    with torch.no_grad():
        out = lm.model(inputs_embeds=x, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True)
        return lm.lm_head(out.last_hidden_state)


def test_left_padded_prefill_then_decode_match(pair):
    ref, fast = pair
    torch.manual_seed(1)
    lengths = [3, 11, 7, 1]
    b, s = len(lengths), max(lengths)
    x = torch.randn(b, s, 64)
    mask = torch.zeros(b, s, dtype=torch.long)
    for i, n in enumerate(lengths):
        mask[i, s - n:] = 1
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    c_ref, c_fast = DynamicCache(config=ref.config), DynamicCache(config=fast.config)
    a, f = _step(ref, x, mask, pos, c_ref), _step(fast, x, mask, pos, c_fast)
    real = mask.bool()
    assert torch.allclose(a[real], f[real], atol=1e-4), (a[real] - f[real]).abs().max()
    assert torch.isfinite(f).all()  # fully masked pad rows must not turn into NaN
    for _ in range(6):
        nxt = a[:, -1].argmax(-1)
        assert torch.equal(nxt, f[:, -1].argmax(-1))
        mask = torch.cat([mask, torch.ones(b, 1, dtype=torch.long)], 1)
        pos = pos[:, -1:] + 1
        emb = ref.model.embed_tokens(nxt[:, None])
        a, f = _step(ref, emb, mask, pos, c_ref), _step(fast, emb, mask, pos, c_fast)
        assert torch.allclose(a, f, atol=1e-4), (a - f).abs().max()
    real = mask.bool()  # pad slots are never attended; what a layer caches there may differ
    for layer_ref, layer_fast in zip(c_ref.layers, c_fast.layers, strict=True):
        assert torch.allclose(layer_ref.keys[:, 0][real], layer_fast.keys[:, 0][real], atol=1e-5)
        assert torch.allclose(layer_ref.values[:, 0][real], layer_fast.values[:, 0][real], atol=1e-5)


def test_chunked_prefill_without_mask_matches(pair):
    """No attention mask: causal prefill, then a 3-token chunk after the cached positions."""
    ref, fast = pair
    torch.manual_seed(2)
    x1, x2 = torch.randn(2, 5, 64), torch.randn(2, 3, 64)
    c_ref, c_fast = DynamicCache(config=ref.config), DynamicCache(config=fast.config)
    pos1, pos2 = torch.arange(5).expand(2, 5), torch.arange(5, 8).expand(2, 3)
    assert torch.allclose(_step(ref, x1, None, pos1, c_ref), _step(fast, x1, None, pos1, c_fast), atol=1e-4)
    assert torch.allclose(_step(ref, x2, None, pos2, c_ref), _step(fast, x2, None, pos2, c_fast), atol=1e-4)
