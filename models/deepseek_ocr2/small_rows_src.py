"""C++ source of the small-row decode kernels (:mod:`models.deepseek_ocr2.small_rows` builds it).

Kept as strings so the package needs no data files. One thread, float32 in and out. The two kernels
that use vector intrinsics (``rows_kernel``: the products; ``attn_rows``: decode attention) exist in
two builds chosen at compile time: AVX-512 (:data:`AVX512_KERNELS`, where ``-march=native`` defines
``__AVX512F__``) and AVX2 + FMA (:data:`~models.deepseek_ocr2.small_rows_avx2.AVX2_KERNELS`), which
performs the same operations in the same order and so gives the same floats bit for bit. On a CPU
with neither, the source does not compile (``#error``) and the caller keeps the torch path.
"""

from models.deepseek_ocr2.small_rows_avx2 import AVX2_KERNELS

_HEAD = r"""
// Small-row kernels for a decode step (1-16 activation rows): float32 in, float32 out, one thread.
#include <immintrin.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <vector>

namespace {

"""

#: The vector kernels with AVX-512 intrinsics (16-lane registers, masked tails).
AVX512_KERNELS = r"""
// y[r, j] = sum_k x[r, k] * w[j, k] for R rows (R <= 8). One weight row per pass (a single linear
// stream: two interleaved weight rows per pass read a cold weight at half the speed on the bench
// machine), two accumulators per activation row (even / odd 16-float chunks of k), then the tail.
template <int R>
void rows_kernel(const float* x, int64_t ldx, const float* w, int64_t N, int64_t K, float* y, int64_t ldy) {
  const int64_t k32 = K / 32 * 32, k16 = K / 16 * 16;
  const __mmask16 tail = (__mmask16)((1u << (K - k16)) - 1);
  for (int64_t j = 0; j < N; ++j) {
    const float* wj = w + j * K;
    __m512 a0[R], a1[R];
    for (int r = 0; r < R; ++r) { a0[r] = _mm512_setzero_ps(); a1[r] = _mm512_setzero_ps(); }
    for (int64_t k = 0; k < k32; k += 32) {
      const __m512 v0 = _mm512_loadu_ps(wj + k), v1 = _mm512_loadu_ps(wj + k + 16);
      for (int r = 0; r < R; ++r) {
        a0[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * ldx + k), v0, a0[r]);
        a1[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * ldx + k + 16), v1, a1[r]);
      }
    }
    if (k16 > k32) {
      const __m512 v0 = _mm512_loadu_ps(wj + k32);
      for (int r = 0; r < R; ++r) a0[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * ldx + k32), v0, a0[r]);
    }
    if (tail) {
      const __m512 v1 = _mm512_maskz_loadu_ps(tail, wj + k16);
      for (int r = 0; r < R; ++r) a1[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, x + r * ldx + k16), v1, a1[r]);
    }
    for (int r = 0; r < R; ++r) y[r * ldy + j] = _mm512_reduce_add_ps(_mm512_add_ps(a0[r], a1[r]));
  }
}

// Decode attention for head dims of NV 16-float vectors (the last one masked to d): the query and
// the output accumulate in registers; keys then values of each (row, head) read once, in order.
template <int NV>
void attn_rows(const float* q, const float* kc, const float* vc, int64_t sb, int64_t sh, int64_t ss,
               const uint8_t* mask, int64_t B, int64_t NH, int64_t S, int64_t d, float scale, float* out) {
  std::vector<float> sc(S);
  const __mmask16 last = (d % 16) ? (__mmask16)((1u << (d % 16)) - 1) : (__mmask16)0xFFFF;
  for (int64_t b = 0; b < B; ++b) {
    const uint8_t* m = mask + b * S;
    for (int64_t hh = 0; hh < NH; ++hh) {
      const float* qq = q + (b * NH + hh) * d;
      const float* kb = kc + b * sb + hh * sh;
      const float* vb = vc + b * sb + hh * sh;
      __m512 qv[NV], o[NV];
      for (int v = 0; v < NV; ++v) {
        qv[v] = _mm512_maskz_loadu_ps(v == NV - 1 ? last : (__mmask16)0xFFFF, qq + 16 * v);
        o[v] = _mm512_setzero_ps();
      }
      float mx = -INFINITY;
      for (int64_t s = 0; s < S; ++s) {
        if (!m[s]) continue;
        const float* kr = kb + s * ss;
        __m512 acc = _mm512_mul_ps(qv[0], _mm512_maskz_loadu_ps(NV == 1 ? last : (__mmask16)0xFFFF, kr));
        for (int v = 1; v < NV; ++v)
          acc = _mm512_fmadd_ps(qv[v], _mm512_maskz_loadu_ps(v == NV - 1 ? last : (__mmask16)0xFFFF, kr + 16 * v), acc);
        const float sv = _mm512_reduce_add_ps(acc) * scale;
        sc[s] = sv;
        mx = sv > mx ? sv : mx;
      }
      float sum = 0.0f;
      for (int64_t s = 0; s < S; ++s) {
        if (!m[s]) continue;
        const float p = expf(sc[s] - mx);
        sum += p;
        const __m512 pw = _mm512_set1_ps(p);
        const float* vr = vb + s * ss;
        for (int v = 0; v < NV; ++v)
          o[v] = _mm512_fmadd_ps(pw, _mm512_maskz_loadu_ps(v == NV - 1 ? last : (__mmask16)0xFFFF, vr + 16 * v), o[v]);
      }
      const __m512 inv = _mm512_set1_ps(1.0f / sum);
      float* dst = out + (b * NH + hh) * d;
      for (int v = 0; v < NV; ++v)
        _mm512_mask_storeu_ps(dst + 16 * v, v == NV - 1 ? last : (__mmask16)0xFFFF, _mm512_mul_ps(o[v], inv));
    }
  }
}

"""

# Everything else: block dispatch, RMSNorm, rotary, SiLU and the exported entry points (plain C++).
_COMMON = r"""
using RowsFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t);
const RowsFn kRows[9] = {nullptr, rows_kernel<1>, rows_kernel<2>, rows_kernel<3>, rows_kernel<4>,
                         rows_kernel<5>, rows_kernel<6>, rows_kernel<7>, rows_kernel<8>};

// y [n, N] = x [n, K] @ w[N, K]^T, rows in blocks of 8 (the weight is re-read from cache per block).
void linear_rows(const float* x, int64_t n, const float* w, int64_t N, int64_t K, float* y) {
  for (int64_t r0 = 0; r0 < n; r0 += 8) {
    const int64_t m = n - r0 < 8 ? n - r0 : 8;
    kRows[m](x + r0 * K, K, w, N, K, y + r0 * N, N);
  }
}

inline float silu(float v) { return v / (1.0f + expf(-v)); }

// out [n, H] = w * (x / sqrt(mean(x^2) + eps)) per row (RMSNorm, float32).
void rmsnorm_rows(const float* x, int64_t n, int64_t H, const float* w, float eps, float* out) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * H;
    float ss = 0.0f;
    for (int64_t c = 0; c < H; ++c) ss += xr[c] * xr[c];
    const float inv = 1.0f / sqrtf(ss / (float)H + eps);
    for (int64_t c = 0; c < H; ++c) out[r * H + c] = w[c] * (xr[c] * inv);
  }
}

// Rotary embedding in place on t [n, nh, d] with cos / sin [n, d] (rotate-half layout):
// t * cos + cat(-t2, t1) * sin.
void rope_rows(float* t, int64_t n, int64_t nh, int64_t d, const float* cos, const float* sin) {
  const int64_t half = d / 2;
  for (int64_t r = 0; r < n; ++r) {
    const float* c = cos + r * d;
    const float* s = sin + r * d;
    for (int64_t h = 0; h < nh; ++h) {
      float* v = t + (r * nh + h) * d;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i + half] + a * s[i + half];
      }
    }
  }
}

}  // namespace

extern "C" {

// Attention input of a layer: x = RMSNorm(h) (weight nw, eps), q / k / v [n, nh, d] = x @ W^T with
// the rotary embedding (cos / sin [n, d]) applied to q and k. Wq / Wk / Wv [nh * d, H].
void ik_attn_in(const float* h, int64_t n, int64_t H, const float* nw, float eps, const float* wq,
                const float* wk, const float* wv, int64_t nh, int64_t d, const float* cos,
                const float* sin, float* q, float* k, float* v) {
  std::vector<float> x(n * H);
  rmsnorm_rows(h, n, H, nw, eps, x.data());
  linear_rows(x.data(), n, wq, nh * d, H, q);
  linear_rows(x.data(), n, wk, nh * d, H, k);
  linear_rows(x.data(), n, wv, nh * d, H, v);
  rope_rows(q, n, nh, d, cos, sin);
  rope_rows(k, n, nh, d, cos, sin);
}

// Attention output of a layer: h [n, H] += a [n, K] @ Wo^T (Wo [H, K]), then x = RMSNorm(h)
// (weight nw, eps) for the MLP.
void ik_attn_out(const float* a, int64_t n, int64_t K, const float* wo, int64_t H, float* h,
                 const float* nw, float eps, float* x) {
  std::vector<float> o(n * H);
  linear_rows(a, n, wo, H, K, o.data());
  for (int64_t i = 0; i < n * H; ++i) h[i] += o[i];
  rmsnorm_rows(h, n, H, nw, eps, x);
}

void ik_linear(const float* x, int64_t n, const float* w, int64_t N, int64_t K, float* y) {
  linear_rows(x, n, w, N, K, y);
}

// Dense gated MLP: out [n, H] = down(silu(gate(x)) * up(x)); gate/up [I, H], down [H, I].
void ik_mlp(const float* x, int64_t n, int64_t H, const float* wg, const float* wu, const float* wd,
            int64_t I, float* out) {
  std::vector<float> g(n * I), u(n * I);
  linear_rows(x, n, wg, I, H, g.data());
  linear_rows(x, n, wu, I, H, u.data());
  for (int64_t i = 0; i < n * I; ++i) g[i] = silu(g[i]) * u[i];
  linear_rows(g.data(), n, wd, H, I, out);
}

// Routed experts: x [T, H], top [T, k] expert ids, wts [T, k] routing weights, gate_up [E, 2I, H]
// (gate rows then up rows), down [E, H, I]; out [T, H] = sum_k wts[t, k] * expert_{top[t, k]}(x[t]).
void ik_moe(const float* x, int64_t T, int64_t H, const int64_t* top, const float* wts, int64_t k,
            const float* gate_up, const float* down, int64_t E, int64_t I, float* out) {
  std::vector<float> xs(T * k * H), gu(T * k * 2 * I), h(T * k * I), p(T * k * H), proj(T * k * H);
  std::vector<int64_t> idx(T * k);
  for (int64_t e = 0; e < E; ++e) {
    int64_t n = 0;
    for (int64_t a = 0; a < T * k; ++a)
      if (top[a] == e) { idx[n] = a; memcpy(&xs[n * H], x + (a / k) * H, H * sizeof(float)); ++n; }
    if (!n) continue;
    linear_rows(xs.data(), n, gate_up + e * 2 * I * H, 2 * I, H, gu.data());
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < I; ++i) h[r * I + i] = silu(gu[r * 2 * I + i]) * gu[r * 2 * I + I + i];
    linear_rows(h.data(), n, down + e * H * I, H, I, p.data());
    for (int64_t r = 0; r < n; ++r) {
      const float wgt = wts[idx[r]];
      float* dst = &proj[idx[r] * H];
      for (int64_t c = 0; c < H; ++c) dst[c] = p[r * H + c] * wgt;
    }
  }
  for (int64_t t = 0; t < T; ++t) {
    float* o = out + t * H;
    memcpy(o, &proj[t * k * H], H * sizeof(float));
    for (int64_t s = 1; s < k; ++s)
      for (int64_t c = 0; c < H; ++c) o[c] += proj[(t * k + s) * H + c];
  }
}

// Decode attention, one query position per row: q [B, NH, d] contiguous; keys/values at
// k + b*sb + h*sh + s*ss (same strides for v), S positions; mask [B, S] (1 = attend);
// out [B, NH * d]. softmax(scale * q k^T) v over the attended positions. d <= 16 * 8.
void ik_attn(const float* q, const float* kc, const float* vc, int64_t sb, int64_t sh, int64_t ss,
             const uint8_t* mask, int64_t B, int64_t NH, int64_t S, int64_t d, float scale, float* out) {
  switch ((d + 15) / 16) {
    case 1: attn_rows<1>(q, kc, vc, sb, sh, ss, mask, B, NH, S, d, scale, out); break;
    case 2: attn_rows<2>(q, kc, vc, sb, sh, ss, mask, B, NH, S, d, scale, out); break;
    case 3: attn_rows<3>(q, kc, vc, sb, sh, ss, mask, B, NH, S, d, scale, out); break;
    case 4: attn_rows<4>(q, kc, vc, sb, sh, ss, mask, B, NH, S, d, scale, out); break;
    case 5: attn_rows<5>(q, kc, vc, sb, sh, ss, mask, B, NH, S, d, scale, out); break;
    case 6: attn_rows<6>(q, kc, vc, sb, sh, ss, mask, B, NH, S, d, scale, out); break;
    case 7: attn_rows<7>(q, kc, vc, sb, sh, ss, mask, B, NH, S, d, scale, out); break;
    default: attn_rows<8>(q, kc, vc, sb, sh, ss, mask, B, NH, S, d, scale, out); break;
  }
}

}  // extern "C"
"""

SOURCE = (_HEAD + "#if defined(__AVX512F__)\n" + AVX512_KERNELS
          + "#elif defined(__AVX2__) && defined(__FMA__)\n" + AVX2_KERNELS
          + "#else\n#error \"small-row kernels need AVX-512 or AVX2 + FMA\"\n#endif\n" + _COMMON)
