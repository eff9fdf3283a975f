"""The hand-written few-row decode kernels (models/deepseek_ocr2/small_rows.py): each kernel against
its torch definition (ragged shapes: row counts across the 8-row blocks, lengths that are not
multiples of 16), padding positions of the batched cache ignored whatever they hold, the products'
summation order (the one both builds, AVX-512 and AVX2 + FMA, follow) bit for bit, a row's result
independent of its neighbours, the decode step with the kernels against transformers' forward
(close logits, same greedy tokens over a changing batch), and the torch fallback."""

from __future__ import annotations

import contextlib
import copy
import logging

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from decoder_service.kv import BatchedKVCache
from decoder_service.prefill import prefill
from models.deepseek_ocr2 import small_rows
from tests.decoder.conftest import vision_tokens

needs_kernels = pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() not in small_rows.CAPABILITIES,
                                   reason="the kernels need AVX-512 or AVX2 (the torch path is used elsewhere)")


@pytest.fixture(scope="module")
def kern() -> small_rows.SmallRows:
    k = small_rows.load()
    assert k is not None, "kernels failed to build on an AVX-512 / AVX2 machine with g++"
    return k


def _close(got: torch.Tensor, want: torch.Tensor, rel: float = 2e-6) -> None:
    err = (got - want).abs().max().item()
    assert err <= rel * max(1.0, want.abs().max().item()), f"max |diff| {err}"


@needs_kernels
@pytest.mark.parametrize("n", [1, 3, 8, 9, 16])
@pytest.mark.parametrize("N,K", [(64, 64), (33, 40), (96, 130)])
def test_linear_matches_torch(kern, n, N, K):
    g = torch.Generator().manual_seed(n * 1000 + N + K)
    x, w = torch.randn(n, K, generator=g), torch.randn(N, K, generator=g)
    _close(kern.linear(x, w), F.linear(x, w))


@needs_kernels
@pytest.mark.parametrize("n", [1, 5, 12])
def test_mlp_and_moe_match_torch(kern, n):
    g = torch.Generator().manual_seed(n)
    H, inter, E, k = 48, 24, 6, 2
    x = torch.randn(n, H, generator=g)
    wg, wu = torch.randn(inter, H, generator=g), torch.randn(inter, H, generator=g)
    wd = torch.randn(H, inter, generator=g)
    _close(kern.mlp(x, wg, wu, wd), F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd))
    gate_up, down = torch.randn(E, 2 * inter, H, generator=g), torch.randn(E, H, inter, generator=g)
    top = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(n)])
    weights = torch.rand(n, k, generator=g)
    want = torch.zeros(n, H)
    for t in range(n):
        for s in range(k):
            gate, up = F.linear(x[t], gate_up[top[t, s]]).chunk(2)
            want[t] += weights[t, s] * F.linear(F.silu(gate) * up, down[top[t, s]])
    _close(kern.moe(x, top, weights, gate_up, down), want)


@needs_kernels
@pytest.mark.parametrize("n", [1, 9])
def test_attention_input_and_output_match_transformers_modules(kern, n):
    """RMSNorm + q/k/v + rotary, and o_proj + residual + RMSNorm, against transformers' own RMSNorm
    module and ``apply_rotary_pos_emb``."""
    from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import (
        DeepseekOcr2TextRMSNorm,
        apply_rotary_pos_emb,
    )

    g = torch.Generator().manual_seed(n + 3)
    H, heads, d = 72, 5, 16
    norm = DeepseekOcr2TextRMSNorm(H, eps=1e-6)
    norm.weight.data = torch.rand(H, generator=g) + 0.5
    h = torch.randn(n, H, generator=g)
    wq, wk, wv = (torch.randn(heads * d, H, generator=g) / 8 for _ in range(3))
    wo = torch.randn(H, heads * d, generator=g) / 8
    angle = torch.rand(n, d // 2, generator=g) * 6
    cos, sin = torch.cat([angle, angle], -1).cos(), torch.cat([angle, angle], -1).sin()
    x = norm(h)
    def heads_of(t: torch.Tensor) -> torch.Tensor:
        return t.view(n, 1, heads, d).transpose(1, 2)

    q_ref, k_ref = apply_rotary_pos_emb(heads_of(F.linear(x, wq)), heads_of(F.linear(x, wk)),
                                        cos[:, None], sin[:, None])
    q, k, v = kern.attn_in(h, norm.weight, norm.variance_epsilon, wq, wk, wv, heads, cos, sin)
    _close(q, q_ref[:, :, 0], rel=1e-5)
    _close(k, k_ref[:, :, 0], rel=1e-5)
    _close(v, F.linear(x, wv).view(n, heads, d), rel=1e-5)
    a = torch.randn(n, heads * d, generator=g)
    h_ref = h + F.linear(a, wo)
    got_x = kern.attn_out(a, wo, h, norm.weight, norm.variance_epsilon)
    _close(h, h_ref, rel=1e-5)  # updated in place
    _close(got_x, norm(h_ref), rel=1e-5)


def _padded_cache(B: int, nh: int, S: int, d: int, cap: int, seed: int):
    """Keys / values [B, nh, S, d] as views of [B, nh, cap, d] buffers (the cache's layout), a
    left-padding mask [B, S] with row b padded by 3 * b positions, and garbage (inf / nan) in the
    padding and spare positions."""
    g = torch.Generator().manual_seed(seed)
    kbuf = torch.full((B, nh, cap, d), float("nan"))
    vbuf = torch.full((B, nh, cap, d), float("inf"))
    kbuf[:, :, 2:2 + S] = torch.randn(B, nh, S, d, generator=g)
    vbuf[:, :, 2:2 + S] = torch.randn(B, nh, S, d, generator=g)
    mask = torch.ones(B, S, dtype=torch.bool)
    for b in range(B):
        mask[b, : 3 * b] = False
        kbuf[b, :, 2:2 + 3 * b] = float("inf")
        vbuf[b, :, 2:2 + 3 * b] = float("nan")
    return kbuf[:, :, 2:2 + S], vbuf[:, :, 2:2 + S], mask


@needs_kernels
@pytest.mark.parametrize("d", [64, 40])
def test_attention_matches_sdpa_and_ignores_padding(kern, d):
    B, nh, S = 5, 3, 37
    k, v, mask = _padded_cache(B, nh, S, d, cap=S + 9, seed=d)
    q = torch.randn(B, nh, d)
    got = kern.attention(q, k, v, mask, d ** -0.5)
    assert torch.isfinite(got).all()
    for b in range(B):  # each row on its real positions only
        real = mask[b]
        want = F.scaled_dot_product_attention(q[b, :, None], k[b][:, real], v[b][:, real], scale=d ** -0.5)
        _close(got[b].view(nh, d), want[:, 0])


@needs_kernels
def test_a_rows_result_does_not_depend_on_its_neighbours(kern):
    g = torch.Generator().manual_seed(7)
    x, w = torch.randn(11, 96, generator=g), torch.randn(70, 96, generator=g)
    whole = kern.linear(x, w)
    for r in (0, 5, 8, 10):
        assert torch.equal(kern.linear(x[r:r + 1].contiguous(), w)[0], whole[r])
        assert torch.equal(kern.linear(x[r - 1 if r else 0:r + 2].contiguous(), w)[1 if r else 0], whole[r])


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 ``a * b + c`` rounded once (the product is exact in float64; for these data the
    float64 sum's second rounding to float32 agrees with a true FMA)."""
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def _documented_order(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``x @ w.T`` ([n, K] x [N, K] float32) summed as the kernels document it, in numpy: per output,
    two 16-lane FMA accumulators over the even / odd 16-float chunks of k (a last full chunk into the
    even one, the zero-padded tail into the odd one), their sum, then the lanes added 8 + 8, 4 + 4,
    then (0 + 2) + (1 + 3), the order of GCC's ``_mm512_reduce_add_ps``."""
    K = x.shape[1]
    k32, k16 = K // 32 * 32, K // 16 * 16
    xs, ws = x[:, None, :], w[None, :, :]
    a0 = a1 = np.zeros((x.shape[0], w.shape[0], 16), np.float32)
    for k in range(0, k32, 32):
        a0 = _fma(xs[..., k:k + 16], ws[..., k:k + 16], a0)
        a1 = _fma(xs[..., k + 16:k + 32], ws[..., k + 16:k + 32], a1)
    if k16 > k32:
        a0 = _fma(xs[..., k32:k16], ws[..., k32:k16], a0)
    if K > k16:
        pad = [(0, 0), (0, 0), (0, 16 - (K - k16))]
        a1 = _fma(np.pad(xs[..., k16:], pad), np.pad(ws[..., k16:], pad), a1)
    s = a0 + a1
    s = s[..., 8:] + s[..., :8]
    s = s[..., 4:] + s[..., :4]
    s = s[..., :2] + s[..., 2:]
    return s[..., 0] + s[..., 1]


@needs_kernels
@pytest.mark.parametrize("n,K", [(1, 70), (4, 50), (8, 96), (9, 13)])
def test_products_sum_in_the_documented_order_bit_for_bit(kern, n, K):
    """Both builds (AVX-512 and AVX2 + FMA) add in the same documented order, so they give the same
    floats: this machine's build against a numpy model of that order, bit for bit."""
    g = torch.Generator().manual_seed(n * 100 + K)
    x, w = torch.randn(n, K, generator=g), torch.randn(23, K, generator=g)
    want = torch.from_numpy(_documented_order(x.numpy(), w.numpy()))
    assert torch.equal(kern.linear(x, w), want)


@contextlib.contextmanager
def _kernels(half, on: bool):
    step = half._lean_step
    saved = step.kernels
    step.kernels = small_rows.load() if on else None
    try:
        yield
    finally:
        step.kernels = saved


@needs_kernels
def test_active_on_the_tiny_checkpoint(half):
    assert half._lean_step.kernels is not None


@needs_kernels
@torch.inference_mode()
def test_decode_step_with_kernels_matches_transformers_on_a_changing_batch(half):
    """Same protocol as test_decode_step.py's bit-identity test: logits close (rounding only), the
    same greedy token every step, cache positions written identically except for rounding."""
    embeds = [half.embed_prompt(vision_tokens(half, n, seed=n + 40), "markdown") for n in (6, 19, 11)]
    kv = BatchedKVCache()
    _, cache, mask = prefill(half, embeds[:2])
    kv.add(cache, mask)
    last = torch.tensor([[3], [7]])
    for step in range(8):
        if step == 2:
            _, cache, mask = prefill(half, embeds[2:])
            kv.add(cache, mask)
            last = torch.cat([last, torch.tensor([[11]])])
        if step == 5:
            kv.keep([0, 2])
            last = last[[0, 2]]
        mask, pos = kv.step_inputs()
        x = half.embed_tokens(last)
        ref_cache = copy.deepcopy(kv.cache)
        with _kernels(half, False):
            ref = half.forward(x, mask, pos, ref_cache)
        with _kernels(half, True):
            got = half.forward(x, mask, pos, kv.cache)
        kv.commit_step(mask)
        _close(got, ref, rel=1e-5)
        assert torch.equal(got.argmax(-1), ref.argmax(-1)), f"step {step}: greedy token differs"
        for a, b in zip(kv.cache.layers, ref_cache.layers, strict=True):
            _close(a.keys, b.keys, rel=1e-5)
            _close(a.values, b.values, rel=1e-5)
        last = got.argmax(-1)[:, None]


@needs_kernels
@torch.inference_mode()
def test_more_than_one_thread_keeps_the_torch_path(half):
    """The kernels are single-threaded: with two intra-op threads the step is torch's, bit for bit."""
    embeds = [half.embed_prompt(vision_tokens(half, n, seed=n + 50), "markdown") for n in (7, 12)]
    kv = BatchedKVCache()
    _, cache, mask = prefill(half, embeds)
    kv.add(cache, mask)
    mask, pos = kv.step_inputs()
    x = half.embed_tokens(torch.tensor([[3], [7]]))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with _kernels(half, False):
            ref = half.forward(x, mask, pos, copy.deepcopy(kv.cache))
        with _kernels(half, True):
            got = half.forward(x, mask, pos, copy.deepcopy(kv.cache))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(got, ref)


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("INKSTREAM_SMALL_ROWS", "0")
    small_rows.load.cache_clear()
    try:
        assert small_rows.load() is None
    finally:
        small_rows.load.cache_clear()


def test_a_failed_build_falls_back_with_a_warning(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("INKSTREAM_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(small_rows, "FLAGS", [*small_rows.FLAGS, "-fno-such-flag-for-the-test"])
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    small_rows.load.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="inkstream.models.small_rows"):
            assert small_rows.load() is None
        assert "unavailable" in caplog.text
        assert not list(tmp_path.glob("*.so"))
    finally:
        small_rows.load.cache_clear()
