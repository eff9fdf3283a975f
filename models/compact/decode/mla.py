"""Multi-head latent attention (MLA) with the up-projections absorbed, for inference.

DeepSeek-V2's MLA (DeepSeek-AI, "DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
Language Model", 2024, section 2.1) caches one compressed latent ``c_kv`` [S, kv_lora_rank] and one
shared rotary key ``k_pe`` [S, qk_rope_head_dim] per position. transformers' ``DeepseekV2Attention``
keeps that compressed cache but re-expands EVERY cached position through ``kv_b_proj`` on every step
(``expand_kv``): a decode step costs O(S x kv_lora_rank x heads x (nope + v)) extra matmul work plus a
copy of the whole expanded key, which on CPU is ~40 % of a decode step of the compact decoder.

The paper's remedy (same section, "absorb W^UK into W^Q and W^UV into W^O") computes attention
directly against the latent cache. With ``W^UK_h`` [nope, r] and ``W^UV_h`` [v, r] the rows of
``kv_b_proj`` for head h:

    score_h(t, s) = (q_nope_h(t) W^UK_h) . c_kv(s) + q_pe_h(t) . k_pe(s)        (times the usual scale)
    out_h(t)      = W^UV_h (sum_s softmax_s(score_h) c_kv(s))

so each step does one [heads, nope] x [nope, r] product per query and one attention over
(r + rope)-wide keys shared by all heads (multi-query attention: the heads are folded into the query
rows of one batched matmul, so the shared key is never copied per head; torch's CPU SDPA would
expand it). The cache contents and layout are unchanged
(``past_key_values.update(c_kv, k_pe)`` exactly as transformers does), so this is a drop-in
replacement for the module's ``forward``; logits equal the original to float rounding
(tests/unit/test_compact_mla.py).
"""

from __future__ import annotations

import types
from typing import Any, cast

import torch
from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2Attention, apply_rotary_emb


def _absorbed_forward(self: DeepseekV2Attention, hidden_states: torch.Tensor,
                      attention_mask: torch.Tensor | None = None, past_key_values: Any = None,
                      position_embeddings: torch.Tensor | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """``DeepseekV2Attention.forward`` with absorbed up-projections. ``hidden_states`` [B, T, H];
    ``attention_mask`` None or bool/additive [B, 1, T, S]; returns ([B, T, H], None). Raises
    ValueError without ``position_embeddings`` (the rotary frequencies).
    """
    b, t = hidden_states.shape[:-1]
    if self.q_proj is not None:  # q_lora_rank None: a plain query projection
        q = self.q_proj(hidden_states)
    else:
        assert self.q_a_proj is not None and self.q_a_layernorm is not None and self.q_b_proj is not None
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))
    q = q.view(b, t, -1, self.qk_head_dim).transpose(1, 2)  # [B, nh, T, nope + rope]
    q_nope, q_pe = torch.split(q, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)

    compressed = self.kv_a_proj_with_mqa(hidden_states)
    c_kv, k_pe = torch.split(compressed, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
    c_kv = self.kv_a_layernorm(c_kv).view(b, 1, t, self.kv_lora_rank)
    k_pe = k_pe.view(b, 1, t, self.qk_rope_head_dim)
    if position_embeddings is None:
        raise ValueError("position_embeddings (the rotary frequencies) are required")
    q_pe, k_pe = apply_rotary_emb(q_pe, k_pe, position_embeddings.to(q_pe.device))
    if past_key_values is not None:
        c_kv, k_pe = past_key_values.update(c_kv, k_pe, self.layer_idx)  # [B, 1, S, r], [B, 1, S, rope]

    # [nh, nope, r], [nh, v, r]: plain tensor attributes set by absorb_mla (not parameters or buffers)
    w_uk, w_uv = cast(torch.Tensor, self._absorbed_w_uk), cast(torch.Tensor, self._absorbed_w_uv)
    nh = q_nope.shape[1]
    # Per-head weights as the bmm batch ([nh, B*T, nope] x [nh, nope, r]): torch.matmul would broadcast
    # (copy) the weights to every row of the batch instead.
    q_lat = torch.bmm(q_nope.permute(1, 0, 2, 3).reshape(nh, b * t, -1), w_uk)
    q_lat = q_lat.view(nh, b, t, -1).permute(1, 0, 2, 3)
    # One key head shared by all heads, so the heads fold into the query rows ([B, nh*T, d] x [B, d, S]);
    # the latent and rotary parts are scored separately so the cache is never concatenated.
    c, kp = c_kv[:, 0], k_pe[:, 0]  # [B, S, r], [B, S, rope]
    s = c.shape[1]
    scores = torch.baddbmm(torch.bmm(q_pe.reshape(b, nh * t, -1), kp.transpose(1, 2)),
                           q_lat.reshape(b, nh * t, -1), c.transpose(1, 2)).view(b, nh, t, s) * self.scaling
    if attention_mask is None and t > 1:  # causal, aligned bottom-right (a chunk after cached positions)
        attention_mask = torch.ones(t, s, dtype=torch.bool, device=scores.device).tril(s - t)
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:  # finite fill: a fully masked (left-pad) row stays finite
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    probs = torch.softmax(scores.float(), dim=-1).to(c_kv.dtype)
    keep = getattr(self, "keep_attention_heads", None)
    if keep:  # a pointer-generator output reads these heads' attention of the last query (copy_head.py)
        self.last_attention = probs[:, list(keep), -1].float()  # [B, len(keep), S]
    o_lat = torch.bmm(probs.view(b, nh * t, s), c).view(b, nh, t, -1)  # [B, nh, T, r]
    out = torch.bmm(o_lat.permute(1, 0, 2, 3).reshape(nh, b * t, -1), w_uv.transpose(1, 2))  # [nh, B*T, v]
    out = out.view(nh, b, t, -1).permute(1, 2, 0, 3).reshape(b, t, -1)
    return self.o_proj(out), None


def absorb_mla(model: torch.nn.Module) -> int:
    """Switch every ``DeepseekV2Attention`` in ``model`` (inference only: weights are copied, so
    call it after loading and do not train afterwards) to the absorbed forward above. Returns the
    number of attention modules switched.
    """
    n = 0
    for module in model.modules():
        if isinstance(module, DeepseekV2Attention):
            w = module.kv_b_proj.weight.detach()  # [nh * (nope + v), r]
            w = w.view(module.num_heads, module.qk_nope_head_dim + module.v_head_dim, module.kv_lora_rank)
            module._absorbed_w_uk = w[:, : module.qk_nope_head_dim].contiguous()
            module._absorbed_w_uv = w[:, module.qk_nope_head_dim:].contiguous()
            # A per-instance forward on purpose: only the switched modules change.
            module.forward = types.MethodType(_absorbed_forward, module)  # type: ignore[method-assign]
            n += 1
    return n
