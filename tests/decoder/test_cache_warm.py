"""The lean decode step streams every weight it multiplies into cache first (models/deepseek_ocr2/
cache_warm.py) when the product has few rows, and a prefill's many-row products skip it; the values
are unchanged (bit-identity to transformers is tests/decoder/test_decode_step.py)."""

from __future__ import annotations

import pytest
import torch

from decoder_service.kv import BatchedKVCache
from decoder_service.prefill import prefill
from models.deepseek_ocr2 import cache_warm
from tests.decoder.conftest import vision_tokens


@pytest.fixture
def warmed(monkeypatch) -> list[torch.Tensor]:
    """Records the tensors passed to ``cache_warm.warm`` (then warms them as usual)."""
    seen: list[torch.Tensor] = []
    real = cache_warm.warm

    def record(*weights: torch.Tensor) -> None:
        seen.extend(weights)
        real(*weights)

    monkeypatch.setattr(cache_warm, "warm", record)
    return seen


def _weights_read_by_a_decode_step(half, top: list[torch.Tensor]) -> set[int]:
    """Data pointers of the matrices a decode step multiplies: every linear of the text model and
    the lm_head, and of each MoE block only the experts its rows were routed to (``top``)."""
    ptrs = {m.weight.data_ptr() for m in half._text.modules() if isinstance(m, torch.nn.Linear)}
    ptrs.add(half._lm_head.weight.data_ptr())
    moe_layers = [layer.mlp for layer in half._text.layers if hasattr(layer.mlp, "experts")]
    for mlp, chosen in zip(moe_layers, top, strict=True):
        for e in chosen.unique().tolist():
            ptrs |= {mlp.experts.gate_up_proj[e].data_ptr(), mlp.experts.down_proj[e].data_ptr()}
    return ptrs


@torch.inference_mode()
def test_decode_step_warms_each_weight_it_multiplies(half, warmed, monkeypatch):
    # The torch path (the few-row kernels of small_rows.py stream each weight themselves).
    monkeypatch.setattr(half._lean_step, "kernels", None)
    embeds = [half.embed_prompt(vision_tokens(half, n, seed=n), "ocr") for n in (7, 11)]
    kv = BatchedKVCache()
    _, cache, mask = prefill(half, embeds)
    kv.add(cache, mask)
    routed: list[torch.Tensor] = []
    for mlp in (layer.mlp for layer in half._text.layers if hasattr(layer.mlp, "experts")):
        real_gate = mlp.gate.forward
        monkeypatch.setattr(mlp.gate, "forward", lambda x, g=real_gate: (out := g(x), routed.append(out[2]))[0])
    warmed.clear()
    mask, pos = kv.step_inputs()
    half.forward(half.embed_tokens(torch.tensor([[3], [5]])), mask, pos, kv.cache)
    got = {w.data_ptr() for w in warmed}
    want = _weights_read_by_a_decode_step(half, routed)
    router = {layer.mlp.gate.weight.data_ptr() for layer in half._text.layers if hasattr(layer.mlp, "experts")}
    assert got - router == want - router  # the router's tiny [experts, H] matrix may or may not be warmed


@torch.inference_mode()
def test_prefill_of_long_prompts_does_not_warm_its_large_products(half, warmed):
    embeds = [half.embed_prompt(vision_tokens(half, n, seed=n), "ocr") for n in (40, 30)]
    prefill(half, embeds)
    attn = [m for layer in half._text.layers[:-1] for m in (layer.self_attn.q_proj, layer.self_attn.k_proj)]
    assert not {w.data_ptr() for w in warmed} & {m.weight.data_ptr() for m in attn}


def test_only_cpu_weights_are_read_by_the_pass(monkeypatch):
    """On an accelerator the pass would be an extra kernel and a full read for nothing: skipped."""
    read: list[str] = []
    real_amax = torch.Tensor.amax

    def amax(self, *args, **kwargs):
        read.append(self.device.type)
        return real_amax(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "amax", amax)
    cache_warm.warm(torch.ones(4, 4), torch.empty(4, 4, device="meta"))
    assert read == ["cpu"]
