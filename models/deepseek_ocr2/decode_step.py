"""Lean decode step for the DeepSeek-OCR-2 text model: one new position per row, same numbers as
transformers' forward, a fraction of its per-step overhead.

A decode step of the continuous-batching engine runs ``DeepseekOcr2TextModel.forward`` on ``B`` rows
of one position each. Profiled on a CPU (bench/decoder_batching.py's model: hidden 512, 4 layers,
8 experts top-2; one thread; ``time.thread_time``): 7.2 ms per step at 1 row and 14.9 ms at 8 rows,
of which the model's kernels (linear, SDPA, ``_grouped_mm``) were ~4 ms at 1 row; the rest is Python
glue that does not change with the batch (module dispatch, keyword plumbing, output dataclasses,
mask and routing helpers) and the MoE's grouped path (``sort``, ``histc``, ``cumsum``, capability
checks, inverse permutation: ~20 small ops per layer; on a prefill of 8 prompts of ~300 tokens it
took 37 ms per MoE layer where the same matmuls one expert after another take 32 ms). What grows
with the batch is memory traffic: at 8 rows every expert is touched (weights read per step 35 ->
62 MB) and the KV cache is read whole (5 -> 42 MB), at ~10 GB/s for one core of the bench machine
(a cold 10 MB read took 1 ms); no code change removes that in float32. The glue is what this module
cuts, and each weight of a product with few rows is streamed into cache before the product
(:mod:`models.deepseek_ocr2.cache_warm`: MKL's small-row kernels read a cold weight at 5-8 GB/s, a
linear pass at ~16-23 GB/s; same results; 8-row step 21.0-22.3 -> 18.2-19.3 ms, 1 row
9.6-9.8 -> 7.7-8.1 ms).

:class:`LeanDecodeStep` walks the layers with plain tensor calls on the model's own parameters (no
copies) and performs, op for op, what transformers does with ``attn_implementation="sdpa"`` and
``experts_implementation="grouped_mm"`` (the defaults the decoder half loads with): the same RMSNorm
modules, rotary embedding, ``apply_rotary_pos_emb``, cache ``update``, SDPA with the boolean padding
mask, router (float32 softmax, unsorted top-k, scaling) and, per expert touched, the matmuls
``_grouped_mm`` runs on the expert's slice of the expert-sorted tokens, then the same weighting,
un-permutation and top-k sum. Results are therefore bit-identical to the transformers forward (a test
checks it), so greedy outputs do not change.

Where the few-row kernels of :mod:`models.deepseek_ocr2.small_rows` build (AVX-512 or AVX2 + FMA CPU,
g++; float32 weights; see :func:`_kernels_apply`), a step of at most ``small_rows.MAX_ROWS`` rows runs them
instead (:meth:`LeanDecodeStep._kernel_step`): per layer one call for RMSNorm + q/k/v + rotary, the
cache update, one for attention, one for ``o_proj`` + residual + RMSNorm, the router in torch, one
for the routed experts and one for the shared experts / dense MLP. Same operations, different
rounding (~3e-6 relative on the bench model's logits, not bit-identical); greedy tokens equal
transformers' ``generate`` in the tests, in bench/decoder_batching.py (``same tokens``) and on
bench-size models of seeds 1-3 (8 prompts x 48 tokens each). Paired in one process (bench model,
load ~25 on 2 cores, thread CPU): 1 row 7.1 -> 3.7 ms, 8 rows 19.8 -> 12.3 ms. Where the 8-row step
went before (ms, 4 layers): SDPA 4.1 -> attention kernel 3.0 (reads K/V once at the speed of an
``amax`` of the same bytes); routed experts 4.1 -> 2.6 (one weight row per pass: a 1-2 row product
of a cold 1 MB weight 95 -> 45 us); RMSNorm, rotary and the per-op glue of q/k/v / o_proj fused into
two calls per layer. What is left at 8 rows is memory traffic (K/V ~44 MB, weights ~60 MB per step)
and the products' FMA rate (8-row q/k/v/o at MKL's speed).

CPU only: on a GPU transformers' ``_grouped_mm`` is one kernel launch, where the per-expert loop here
would launch two matmuls per expert touched and wait for the expert counts on the host. Other
configurations it does not reproduce exactly (grouped-query attention, ``group_limited_greedy``
routing, biases on experts, another attention or experts implementation) make :func:`lean_step_for`
return None and the caller keeps using the transformers forward.

Tried on the bench model and not kept (#39 item 5; one thread, paired in one process, load 10-18 on
2 cores; 8-row step with ~290-position prompts, thread CPU): ``torch.compile`` (inductor) of the
RMSNorm and rotary glue 22.0 -> 24.3 ms (``dynamic=False``) or 21.7 -> 26.5 ms (``dynamic=True``),
1 row 6.8 -> 7.7 ms, logits off by 2e-3; an inductor-generated decode attention 4.5 -> 4.7 ms per
4 layers (80 s to compile); KV cache in bfloat16 through SDPA 4.5 -> 10.5 ms per 4 layers (the CPU
kernel's reduced-precision path); one SDPA call per row 4.6 -> 5.6 ms; ``q @ k^T`` / softmax / ``@ v``
with bmm 4.6 -> 5.2 ms; all routed experts as one ``[E * 2I, H]`` product plus a ``bmm`` (no sort)
19.4 -> 23.8 ms; ``torch.rms_norm`` for the RMSNorm modules (bit-identical) 22.5 -> 23.3 ms;
expert products as ``W @ x^T`` for <= 4 rows 19.8 -> 20.5 ms; two torch threads on the 2 shared
cores: SDPA 4.6 ms -> over 100 ms wall (OpenMP waits for a busy core). Kernels (small_rows.py,
thread CPU per call, cold 1 MB weights, load ~20): two interleaved weight rows per pass (16 FMA
accumulators) 95-106 us per 1-2 row product vs 42-51 us for one row per pass (a cold weight is read
at half speed); software prefetch 4-16 KB ahead no change; the first attention kernel with the output
accumulated in memory 1.23 ms vs SDPA 1.19 ms (8 rows x 8 heads x 340 positions) before the
query / output moved into registers (0.65 ms).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from models.deepseek_ocr2 import cache_warm, small_rows
from models.deepseek_ocr2.cache_warm import linear


class LeanDecodeStep:
    """One decode step over a ``DeepseekOcr2TextModel`` (``text``) and its ``lm_head``; see the module
    docstring. Holds references to the model's modules, never copies of their weights.
    """

    def __init__(self, text: Any, lm_head: nn.Linear):
        from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import apply_rotary_pos_emb

        self._rotary = apply_rotary_pos_emb
        self.text, self.lm_head = text, lm_head
        cfg = text.config
        self.layers = list(text.layers[: cfg.num_hidden_layers])
        # Hand-written few-row kernels (models/deepseek_ocr2/small_rows.py) where they apply, else None.
        self.kernels = small_rows.load() if _kernels_apply(text, lm_head) else None

    @torch.no_grad()
    def __call__(self, inputs_embeds: torch.Tensor, mask: torch.Tensor, position_ids: torch.Tensor,
                 cache: Any) -> torch.Tensor:
        """``inputs_embeds`` [B, 1, H] (model dtype and device), ``mask`` bool [B, 1, 1, S] (True = attend;
        S = cached + 1), ``position_ids`` [B, 1] int64, ``cache`` a transformers ``Cache`` holding S - 1
        positions per layer (grows by one). Returns the logits [B, V] as float32.
        """
        h = inputs_embeds
        cos, sin = self.text.rotary_emb(h, position_ids)
        B, T = h.shape[:2]
        # The kernels run on one thread: with more intra-op threads (a pod's OMP_NUM_THREADS) MKL's
        # parallel products are kept, as the kernels were measured against one-thread torch only.
        if self.kernels is not None and T == 1 and B <= small_rows.MAX_ROWS and torch.get_num_threads() == 1:
            return self._kernel_step(h, cos, sin, mask, cache)
        for i, layer in enumerate(self.layers):
            h = h + self._attention(layer.self_attn, layer.input_layernorm(h), cos, sin, mask, cache, i)
            mlp = layer.mlp
            x = layer.post_attention_layernorm(h)
            h = h + (self._moe(mlp, x) if hasattr(mlp, "experts") else mlp_forward(mlp, x))
        h = self.text.norm(h)
        return linear(self.lm_head, h[:, -1]).float()

    def _kernel_step(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
                     cache: Any) -> torch.Tensor:
        """The step with :mod:`~models.deepseek_ocr2.small_rows`' kernels: per layer one call for
        RMSNorm + q/k/v + rotary, the cache update, one for attention, one for ``o_proj`` + residual +
        RMSNorm, the router (torch), one for the routed experts and one per dense MLP / shared
        experts; final norm and ``lm_head`` as in :meth:`__call__`. ``h`` [B, 1, H]; returns logits
        [B, V] float32.
        """
        kern = self.kernels
        assert kern is not None
        B, _, H = h.shape
        mask2 = mask.reshape(B, -1).contiguous()
        h = h.reshape(B, H).clone()  # updated in place by attn_out
        cos, sin = cos.reshape(B, -1).contiguous(), sin.reshape(B, -1).contiguous()
        for i, layer in enumerate(self.layers):
            attn, n1, n2 = layer.self_attn, layer.input_layernorm, layer.post_attention_layernorm
            heads = attn.config.num_attention_heads
            q, k, v = kern.attn_in(h, n1.weight, n1.variance_epsilon, attn.q_proj.weight, attn.k_proj.weight,
                                   attn.v_proj.weight, heads, cos, sin)
            keys, values = cache.update(k.unsqueeze(2), v.unsqueeze(2), i)
            a = kern.attention(q, keys, values, mask2, attn.scaling)
            x = kern.attn_out(a, attn.o_proj.weight, h, n2.weight, n2.variance_epsilon)
            mlp = layer.mlp
            if hasattr(mlp, "experts"):
                _, weights, top = mlp.gate(x)
                ex, sh = mlp.experts, mlp.shared_experts
                routed = kern.moe(x, top.contiguous(), weights.contiguous(), ex.gate_up_proj, ex.down_proj)
                h = h + (routed + kern.mlp(x, sh.gate_proj.weight, sh.up_proj.weight, sh.down_proj.weight))
            else:
                h = h + kern.mlp(x, mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight)
        h = self.text.norm(h)
        return linear(self.lm_head, h).float()

    def _attention(self, attn: Any, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   mask: torch.Tensor, cache: Any, idx: int) -> torch.Tensor:
        B, T = x.shape[:2]
        shape = (B, T, -1, attn.head_dim)
        q = linear(attn.q_proj, x).view(shape).transpose(1, 2)
        k = linear(attn.k_proj, x).view(shape).transpose(1, 2)
        v = linear(attn.v_proj, x).view(shape).transpose(1, 2)
        q, k = self._rotary(q, k, cos, sin)
        k, v = cache.update(k, v, idx)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=attn.scaling,
                                             is_causal=False)
        out = out.transpose(1, 2).contiguous().reshape(B, T, -1).contiguous()
        return linear(attn.o_proj, out)

    @staticmethod
    def _moe(moe: Any, x: torch.Tensor) -> torch.Tensor:
        """Router, routed experts (:func:`experts_forward`) and shared experts of one MoE block."""
        _, weights, top = moe.gate(x)
        routed = experts_forward(moe.experts, x.view(-1, x.shape[-1]), top, weights).view(x.shape)
        return routed + mlp_forward(moe.shared_experts, x)


def experts_forward(ex: Any, hidden: torch.Tensor, top: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Routed experts of a ``DeepseekOcr2TextExperts`` ``ex``: ``hidden`` [T, H], ``top`` [T, k] expert
    ids, ``weights`` [T, k] routing weights -> [T, H]. Tokens are sorted by expert as transformers'
    ``grouped_mm`` path does and each expert touched runs one gate/up and one down matmul on its slice,
    the matmuls ``_grouped_mm`` runs per group on a CPU, so results are bit-identical to that path
    without its per-call bookkeeping (``histc``, ``cumsum``, capability checks, inverse permutation).
    An expert with at most ``WARM_MAX_ROWS`` tokens has its weights streamed into cache first
    (:mod:`models.deepseek_ocr2.cache_warm`; same results) The gather, routing-weight product and
    un-permutation are done in place or by ``index_select`` / ``index_copy_`` (the same values
    moved and multiplied, without advanced-indexing temporaries: 61 -> 59 ms per MoE layer of an
    8-prompt prefill, 2292 tokens).
    """
    k = top.shape[-1]
    ids_sorted, perm = torch.sort(top.reshape(-1))
    xs = hidden.index_select(0, perm // k)
    counts = torch.bincount(ids_sorted, minlength=ex.num_experts).tolist()
    proj = xs.new_empty(xs.shape[0], ex.down_proj.shape[1])
    start = 0
    for e, n in enumerate(counts):
        if n:
            if n <= cache_warm.WARM_MAX_ROWS:
                cache_warm.warm(ex.gate_up_proj[e], ex.down_proj[e])
            gate, up = F.linear(xs[start:start + n], ex.gate_up_proj[e]).chunk(2, dim=-1)
            torch.mm(ex.act_fn(gate) * up, ex.down_proj[e].t(), out=proj[start:start + n])
            start += n
    proj.mul_(weights.reshape(-1)[perm].unsqueeze(-1))
    unsorted = torch.empty_like(proj).index_copy_(0, perm, proj)
    return unsorted.view(hidden.shape[0], k, -1).sum(dim=1).to(hidden.dtype)


def mlp_forward(mlp: Any, x: torch.Tensor) -> torch.Tensor:
    """A dense MLP block (a layer's MLP or an MoE's shared experts) on ``x`` [..., H]: for
    transformers' ``DeepseekOcr2TextMLP`` its own operations, ``down(act(gate(x)) * up(x))``, with
    each weight streamed into cache first when ``x`` has few rows (:func:`cache_warm.linear
    <models.deepseek_ocr2.cache_warm.linear>`; same results); any other module is called as is.
    """
    if type(mlp) is not _dense_mlp_type():
        return mlp(x)
    return linear(mlp.down_proj, mlp.act_fn(linear(mlp.gate_proj, x)) * linear(mlp.up_proj, x))


@functools.cache
def _dense_mlp_type() -> Any:
    """The class ``DeepseekOcr2TextMLP`` of transformers, imported once (an import statement in the
    step itself ran on every dense block of every decode step).
    """
    from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import DeepseekOcr2TextMLP

    return DeepseekOcr2TextMLP


def _kernels_apply(text: Any, lm_head: nn.Linear) -> bool:
    """Whether :meth:`LeanDecodeStep._kernel_step` reproduces the model: float32 CPU weights, all
    contiguous, no biases, SiLU gated MLPs (transformers' ``DeepseekOcr2TextMLP``) as dense layers and
    shared experts, transformers' ``DeepseekOcr2TextRMSNorm`` before attention and MLP, an even head
    dim of at most ``small_rows.MAX_HEAD_DIM`` (rotate-half rotary), and the router module the lean
    step already requires.
    """
    cfg = text.config
    if getattr(cfg, "hidden_act", None) != "silu" or lm_head.weight.device.type != "cpu":
        return False
    head_dim = text.layers[0].self_attn.head_dim
    if head_dim > small_rows.MAX_HEAD_DIM or head_dim % 2:
        return False
    mlp_type, norm_type = _dense_mlp_type(), _rms_norm_type()
    for layer in text.layers[: cfg.num_hidden_layers]:
        attn, mlp = layer.self_attn, layer.mlp
        norms = [layer.input_layernorm, layer.post_attention_layernorm]
        if any(type(m) is not norm_type for m in norms):
            return False
        linears = [attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj]
        dense = [mlp.shared_experts] if hasattr(mlp, "experts") else [mlp]
        if any(type(m) is not mlp_type for m in dense):
            return False
        linears += [lin for m in dense for lin in (m.gate_proj, m.up_proj, m.down_proj)]
        tensors = [lin.weight for lin in linears] + [m.weight for m in norms]
        if any(getattr(lin, "bias", None) is not None for lin in linears):
            return False
        if hasattr(mlp, "experts"):
            tensors += [mlp.experts.gate_up_proj, mlp.experts.down_proj]
        if any(t.dtype != torch.float32 or not t.is_contiguous() or t.device.type != "cpu" for t in tensors):
            return False
    return True


@functools.cache
def _rms_norm_type() -> Any:
    """The class ``DeepseekOcr2TextRMSNorm`` of transformers (what the kernels' RMSNorm reproduces)."""
    from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import DeepseekOcr2TextRMSNorm

    return DeepseekOcr2TextRMSNorm


def install_sorted_experts(text: Any) -> int:
    """Make every MoE block of ``text`` run its routed experts with :func:`experts_forward` (prefill
    included; an instance attribute, the class is untouched). Only valid where :func:`lean_step_for`
    returned a step (the ``grouped_mm`` configuration). Returns the number of blocks changed.
    """
    n = 0
    for layer in text.layers[: text.config.num_hidden_layers]:
        if hasattr(layer.mlp, "experts"):
            layer.mlp.experts.forward = functools.partial(experts_forward, layer.mlp.experts)
            n += 1
    return n


def lean_step_for(text: Any, lm_head: nn.Linear) -> LeanDecodeStep | None:
    """A :class:`LeanDecodeStep` for ``text`` when it reproduces the transformers forward exactly
    (see the module docstring), else None.
    """
    cfg = text.config
    if lm_head.weight.device.type != "cpu":  # on a GPU ``_grouped_mm`` is one kernel and needs no host sync
        return None
    if getattr(cfg, "_attn_implementation", None) != "sdpa":
        return None
    if getattr(cfg, "num_key_value_heads", None) != getattr(cfg, "num_attention_heads", None):
        return None
    # Attributes of transformers' experts dispatch (5.x ``use_experts_implementation``); an older or
    # newer layout without them is not the one reproduced here.
    expected = {"_experts_implementation": "grouped_mm", "has_bias": False, "has_gate": True,
                "is_transposed": False, "is_concatenated": True, "has_post_expert_norm": False}
    for layer in text.layers[: cfg.num_hidden_layers]:
        mlp = layer.mlp
        if hasattr(mlp, "experts"):
            ex = mlp.experts
            found = {a: getattr(ex.config if a.startswith("_") else ex, a, None) for a in expected}
            if found != expected or getattr(mlp.gate, "topk_method", None) != "greedy":
                return None
    return LeanDecodeStep(text, lm_head)
