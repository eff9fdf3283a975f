"""Packed prefill for the DeepSeek-OCR-2 text model: several prompts in one forward, no padding, each
prompt's attention causal over its own positions, and the last layer run only where a logit is read.

The engine prefills the newcomers of an iteration together (``decoder_service/prefill.py``). Through
transformers' forward that is one left-padded batch ``[b, L_max, H]`` with a 4-D padding + causal
mask, which costs as much as ``b`` single prefills (measured on bench/decoder_batching.py's model,
hidden 512, 4 layers, 8 prompts of 276-297 positions, one CPU thread: 428 ms batched, 435 ms one by
one): the linears already run at full GEMM speed on one prompt of ~280 rows, the masked attention
computes every block of the ``L x L`` score matrix (the causal kernel skips the upper half) and the
padding rows are computed like real ones.

:class:`LeanPrefill` instead

* packs the prompts into one sequence ``[1, N, H]`` (``N = sum L_i``, no padding rows) for every
  per-position operation (RMSNorm, projections, rotary embedding with each prompt's own positions,
  router and experts, residual adds): the same operations transformers runs, on rows that are
  independent of each other;
* runs attention prompt by prompt with ``is_causal=True`` on its own slice of the packed queries,
  keys and values: the call transformers makes for one unpadded prompt (no mask: the causal kernel);
* in the last layer computes keys and values for every position (the cache needs them) but the
  query, attention output, ``o_proj``, MLP / experts, final norm and ``lm_head`` only at each
  prompt's last position, the only one whose hidden state is read (its logits pick the first
  token). The other positions' last-layer outputs are never used by a decoder-only model.

Results are not bit-identical to the padded forward (matrix products with a different number of
rows may round differently: ~1e-6 relative), just as a left-padded batch is not bit-identical to
its prompts one by one; greedy tokens are checked against transformers' ``generate`` in the tests
and by bench/decoder_batching.py (``same tokens``). The cache comes back in the layout the engine's
batched cache takes (``[b, heads, L_max, d]``, each prompt right-aligned, zeros on the left) with its
``[b, L_max]`` mask.

Valid where :func:`~models.deepseek_ocr2.decode_step.lean_step_for` returns a step (CPU, SDPA,
multi-head attention, grouped-mm experts with greedy routing): it reuses that step's modules.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from models.deepseek_ocr2.decode_step import LeanDecodeStep


class LeanPrefill:
    """Packed prefill over the modules of a :class:`LeanDecodeStep` (see the module docstring)."""

    def __init__(self, step: LeanDecodeStep, new_cache: Any):
        from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import rotate_half

        self._rotate_half = rotate_half
        self.step = step
        self.text, self.lm_head, self.layers = step.text, step.lm_head, step.layers
        self._new_cache = new_cache

    @torch.no_grad()
    def __call__(self, embeds: list[torch.Tensor]) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """``embeds``: prompts [L_i, H] (model dtype and device, at least one, L_i >= 1). Returns
        (logits [b, V] float32 at each prompt's last position, a transformers ``Cache`` whose layers
        hold keys / values [b, heads, L_max, head_dim] right-aligned with zeros on the left, mask
        [b, L_max] int64 with 1 on real positions) — what ``decoder_service.prefill.prefill`` returns.
        """
        lens = [int(e.shape[0]) for e in embeds]
        b, n_tok, longest = len(lens), sum(lens), max(lens)
        dev = embeds[0].device
        starts = [sum(lens[:j]) for j in range(b)]
        last = torch.tensor([s + n - 1 for s, n in zip(starts, lens, strict=True)], device=dev)
        h = torch.cat(embeds)[None]  # [1, N, H]
        pos = torch.cat([torch.arange(n, device=dev) for n in lens])[None]
        cos, sin = self.text.rotary_emb(h, pos)  # [1, N, d] each
        cache = self._new_cache()
        n_layers = len(self.layers)
        for i, layer in enumerate(self.layers):
            final = i == n_layers - 1
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            k = self._rope(attn.k_proj(x).view(1, n_tok, -1, attn.head_dim).transpose(1, 2), cos, sin)
            v = attn.v_proj(x).view(1, n_tok, -1, attn.head_dim).transpose(1, 2)
            self._store(cache.layers[i], k, v, starts, lens, longest)
            if final:  # only the last positions are read from here on
                x, h, cos_q, sin_q = x[:, last], h[:, last], cos[:, last], sin[:, last]
            else:
                cos_q, sin_q = cos, sin
            q = self._rope(attn.q_proj(x).view(1, x.shape[1], -1, attn.head_dim).transpose(1, 2), cos_q, sin_q)
            out = q.new_empty(1, q.shape[2], q.shape[1], attn.head_dim)  # [1, rows, heads, d]
            for j, (s, n) in enumerate(zip(starts, lens, strict=True)):
                rows = slice(j, j + 1) if final else slice(s, s + n)
                o = F.scaled_dot_product_attention(q[:, :, rows], k[:, :, s:s + n], v[:, :, s:s + n],
                                                   dropout_p=0.0, scale=attn.scaling, is_causal=not final and n > 1)
                out[:, rows] = o.transpose(1, 2)
            h = h + attn.o_proj(out.reshape(1, out.shape[1], -1))
            mlp = layer.mlp
            x = layer.post_attention_layernorm(h)
            h = h + (self.step._moe(mlp, x) if hasattr(mlp, "experts") else mlp(x))
        logits = self.lm_head(self.text.norm(h)[0]).float()
        mask = torch.zeros(b, longest, dtype=torch.long, device=dev)
        for j, n in enumerate(lens):
            mask[j, longest - n:] = 1
        return logits, cache, mask

    def _rope(self, t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """The operations of transformers' ``apply_rotary_pos_emb`` on one tensor [1, heads, T, d]."""
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return (t * cos) + (self._rotate_half(t) * sin)

    @staticmethod
    def _store(layer: Any, k: torch.Tensor, v: torch.Tensor, starts: list[int], lens: list[int],
               longest: int) -> None:
        """Fill a transformers ``DynamicLayer`` with the packed keys / values [1, heads, N, d] laid out
        as [b, heads, longest, d], each prompt right-aligned, zeros on the left.
        """
        keys = k.new_zeros(len(lens), k.shape[1], longest, k.shape[3])
        values = v.new_zeros(len(lens), v.shape[1], longest, v.shape[3])
        for j, (s, n) in enumerate(zip(starts, lens, strict=True)):
            keys[j, :, longest - n:] = k[0, :, s:s + n]
            values[j, :, longest - n:] = v[0, :, s:s + n]
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values
