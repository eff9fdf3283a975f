"""The packed prefill (models/deepseek_ocr2/prefill_step.py): several prompts in one forward without
padding rows give each prompt's own logits and KV cache (as transformers computes the prompt alone)
in the left-padded layout the engine's batched cache takes, and run the last layer only at the
positions whose logits are read."""

from __future__ import annotations

import pytest
import torch

from decoder_service.kv import BatchedKVCache
from decoder_service.prefill import prefill
from inkstream.errors import InvalidInput
from models.base import left_pad
from tests.decoder.conftest import vision_tokens
from tests.decoder.test_decode_step import _padded_prefill, _transformers_only

SIZES = (30, 1, 12, 21)  # vision tokens per prompt: different lengths, one very short


def _prompts(half) -> list[torch.Tensor]:
    return [half.embed_prompt(vision_tokens(half, n, seed=n), "markdown") for n in SIZES]


@torch.inference_mode()
def test_packed_prefill_gives_each_prompts_own_logits_and_cache(half):
    embeds = _prompts(half)
    logits, cache, mask = half.prefill_packed(embeds)
    longest = max(e.shape[0] for e in embeds)
    assert torch.equal(mask, left_pad(embeds)[1])
    with _transformers_only(half):  # each prompt alone through transformers' forward: the reference
        for j, e in enumerate(embeds):
            n = e.shape[0]
            ref_cache = half.new_cache()
            ref = half.forward(e[None], torch.ones(1, n, dtype=torch.long), torch.arange(n)[None], ref_cache)
            torch.testing.assert_close(logits[j:j + 1], ref, rtol=1e-5, atol=1e-4)
            assert int(logits[j].argmax()) == int(ref[0].argmax())
            for got, want in zip(cache.layers, ref_cache.layers, strict=True):
                assert got.keys.shape == (len(embeds), want.keys.shape[1], longest, want.keys.shape[3])
                torch.testing.assert_close(got.keys[j, :, longest - n:], want.keys[0], rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(got.values[j, :, longest - n:], want.values[0], rtol=1e-5, atol=1e-5)
                assert not got.keys[j, :, :longest - n].any() and not got.values[j, :, :longest - n].any()


@torch.inference_mode()
def test_packed_prefill_joins_the_batch_and_decodes_like_the_padded_prefill(half):
    """Three greedy steps after each prefill: the same tokens, logits within float noise."""
    embeds = _prompts(half)

    def run() -> tuple[list[list[int]], torch.Tensor]:
        logits, cache, mask = prefill(half, embeds)
        kv = BatchedKVCache()
        kv.add(cache, mask)
        toks, all_logits = [logits.argmax(-1).tolist()], [logits]
        for _ in range(3):
            m, pos = kv.step_inputs()
            logits = half.forward(half.embed_tokens(torch.tensor(toks[-1])[:, None]), m, pos, kv.cache)
            kv.commit_step(m)
            toks.append(logits.argmax(-1).tolist())
            all_logits.append(logits)
        return toks, torch.stack(all_logits)

    packed_toks, packed_logits = run()
    with _padded_prefill(half):
        padded_toks, padded_logits = run()
    assert packed_toks == padded_toks
    torch.testing.assert_close(packed_logits, padded_logits, rtol=1e-5, atol=1e-4)


@torch.inference_mode()
def test_packed_prefill_runs_no_padding_rows_and_the_last_layer_only_at_last_positions(half):
    """Rows seen by the first and last layers' output projections: every real position (no padding)
    in the first layer, one position per prompt in the last (the left-padded forward ran
    ``prompts x longest`` rows through every layer)."""
    embeds = _prompts(half)
    layers = half._text.layers[: half._text.config.num_hidden_layers]
    seen: dict[int, int] = {}
    hooks = [layer.self_attn.o_proj.register_forward_hook(
        lambda mod, args, out, i=i: seen.__setitem__(i, args[0].shape[-2])) for i, layer in enumerate(layers)]
    try:
        prefill(half, embeds)
    finally:
        for h in hooks:
            h.remove()
    assert seen[0] == sum(e.shape[0] for e in embeds)
    assert seen[len(layers) - 1] == len(embeds)


def test_packed_prefill_refuses_a_prompt_past_the_context(half):
    too_long = torch.zeros(half.max_positions + 1, half.hidden_size)
    with pytest.raises(InvalidInput, match="exceeds"):
        half.prefill_packed([too_long])
    with pytest.raises(InvalidInput, match="prompt embeddings"):
        half.prefill_packed([torch.zeros(3, half.hidden_size + 1)])
