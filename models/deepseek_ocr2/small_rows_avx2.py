"""AVX2 + FMA build of the two vector kernels of :mod:`models.deepseek_ocr2.small_rows_src`
(``rows_kernel``, ``attn_rows``), for CPUs without AVX-512 (compiled where ``__AVX512F__`` is not
defined; same signatures, so the rest of the source is shared).

Same numbers as the AVX-512 build, bit for bit: each 16-float vector of that build is a ``V16``, two
``__m256`` (lanes 0-7 and 8-15); a masked 16-float load is two ``_mm256_maskload_ps`` (masked lanes
read as 0, as ``_mm512_maskz_loadu_ps``); each lane sees the same FMAs in the same order; and the lane
sum :func:`hsum16` adds in the order of GCC's ``_mm512_reduce_add_ps`` (8 + 8 lanes, 4 + 4, then
(0 + 2) + (1 + 3)). So a row's result does not depend on the other rows of the batch, nor on which of
the two builds ran.

Only the register blocking differs: AVX2 has 16 vector registers, so a product pass over one weight
row serves at most 3 activation rows from registers (4 accumulators of 8 floats each) and the next
3 rows re-read that weight row from L1; the attention kernel is unchanged (its query and output
vectors are live in different loops).
"""

AVX2_KERNELS = r"""
struct V16 { __m256 lo, hi; };      // 16 floats: lanes 0-7, 8-15
struct M16 { __m256i lo, hi; };     // which of 16 lanes a masked load / store touches

inline V16 zero16() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline V16 set16(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
inline V16 load16(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline V16 load16(const float* p, M16 m) { return {_mm256_maskload_ps(p, m.lo), _mm256_maskload_ps(p + 8, m.hi)}; }
// p[0:16], the lanes of m only where masked (the last vector of a head), else a plain load.
inline V16 load16(const float* p, bool masked, M16 m) { return masked ? load16(p, m) : load16(p); }
inline void store16(float* p, M16 m, V16 v) {
  _mm256_maskstore_ps(p, m.lo, v.lo);
  _mm256_maskstore_ps(p + 8, m.hi, v.hi);
}
inline V16 add16(V16 a, V16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline V16 mul16(V16 a, V16 b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline V16 fmadd16(V16 a, V16 b, V16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}

// The first n of 16 lanes (n in 0..16).
inline M16 first16(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return {_mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx), _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n - 8), idx)};
}

// Sum of the 16 lanes in _mm512_reduce_add_ps's order (GCC): hi + lo halves, then the 128-bit
// halves, then lanes (0 + 2) + (1 + 3).
inline float hsum16(V16 v) {
  const __m256 s8 = _mm256_add_ps(v.hi, v.lo);
  const __m128 s4 = _mm_add_ps(_mm256_extractf128_ps(s8, 1), _mm256_castps256_ps128(s8));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// y[r, j] for G rows (G <= 3) and one weight row wj: two accumulators per row (even / odd 16-float
// chunks of k), then the 16-chunk remainder into the even one and the masked tail into the odd one.
template <int G>
inline void rows_dot(const float* x, int64_t ldx, const float* wj, int64_t K, int64_t k32, int64_t k16,
                     M16 tail, float* y, int64_t ldy) {
  V16 a0[G], a1[G];
  for (int r = 0; r < G; ++r) { a0[r] = zero16(); a1[r] = zero16(); }
  for (int64_t k = 0; k < k32; k += 32) {
    const V16 v0 = load16(wj + k), v1 = load16(wj + k + 16);
    for (int r = 0; r < G; ++r) {
      a0[r] = fmadd16(load16(x + r * ldx + k), v0, a0[r]);
      a1[r] = fmadd16(load16(x + r * ldx + k + 16), v1, a1[r]);
    }
  }
  if (k16 > k32) {
    const V16 v0 = load16(wj + k32);
    for (int r = 0; r < G; ++r) a0[r] = fmadd16(load16(x + r * ldx + k32), v0, a0[r]);
  }
  if (K > k16) {
    const V16 v1 = load16(wj + k16, tail);
    for (int r = 0; r < G; ++r) a1[r] = fmadd16(load16(x + r * ldx + k16, tail), v1, a1[r]);
  }
  for (int r = 0; r < G; ++r) y[r * ldy] = hsum16(add16(a0[r], a1[r]));
}

// y[r, j] = sum_k x[r, k] * w[j, k] for R rows (R <= 8), one weight row per pass (rows 3 at a time).
template <int R>
void rows_kernel(const float* x, int64_t ldx, const float* w, int64_t N, int64_t K, float* y, int64_t ldy) {
  const int64_t k32 = K / 32 * 32, k16 = K / 16 * 16;
  const M16 tail = first16(K - k16);
  for (int64_t j = 0; j < N; ++j) {
    const float* wj = w + j * K;
    for (int r0 = 0; r0 < R; r0 += 3) {
      const float* xr = x + r0 * ldx;
      float* yr = y + r0 * ldy + j;
      switch (R - r0 < 3 ? R - r0 : 3) {
        case 1: rows_dot<1>(xr, ldx, wj, K, k32, k16, tail, yr, ldy); break;
        case 2: rows_dot<2>(xr, ldx, wj, K, k32, k16, tail, yr, ldy); break;
        default: rows_dot<3>(xr, ldx, wj, K, k32, k16, tail, yr, ldy); break;
      }
    }
  }
}

// Decode attention for head dims of NV 16-float vectors (the last one masked to d), as the AVX-512
// build: scores q . k (products, then FMAs over the vectors, then the lane sum), softmax with max
// subtraction, output accumulated by FMAs over the attended positions in order.
template <int NV>
void attn_rows(const float* q, const float* kc, const float* vc, int64_t sb, int64_t sh, int64_t ss,
               const uint8_t* mask, int64_t B, int64_t NH, int64_t S, int64_t d, float scale, float* out) {
  std::vector<float> sc(S);
  const M16 all = first16(16), last = first16(d % 16 ? d % 16 : 16);
  for (int64_t b = 0; b < B; ++b) {
    const uint8_t* m = mask + b * S;
    for (int64_t hh = 0; hh < NH; ++hh) {
      const float* qq = q + (b * NH + hh) * d;
      const float* kb = kc + b * sb + hh * sh;
      const float* vb = vc + b * sb + hh * sh;
      V16 qv[NV], o[NV];
      for (int v = 0; v < NV; ++v) {
        qv[v] = load16(qq + 16 * v, v == NV - 1, last);
        o[v] = zero16();
      }
      float mx = -INFINITY;
      for (int64_t s = 0; s < S; ++s) {
        if (!m[s]) continue;
        const float* kr = kb + s * ss;
        V16 acc = mul16(qv[0], load16(kr, NV == 1, last));
        for (int v = 1; v < NV; ++v) acc = fmadd16(qv[v], load16(kr + 16 * v, v == NV - 1, last), acc);
        const float sv = hsum16(acc) * scale;
        sc[s] = sv;
        mx = sv > mx ? sv : mx;
      }
      float sum = 0.0f;
      for (int64_t s = 0; s < S; ++s) {
        if (!m[s]) continue;
        const float p = expf(sc[s] - mx);
        sum += p;
        const V16 pw = set16(p);
        const float* vr = vb + s * ss;
        for (int v = 0; v < NV; ++v) o[v] = fmadd16(pw, load16(vr + 16 * v, v == NV - 1, last), o[v]);
      }
      const V16 inv = set16(1.0f / sum);
      float* dst = out + (b * NH + hh) * d;
      for (int v = 0; v < NV; ++v) store16(dst + 16 * v, v == NV - 1 ? last : all, mul16(o[v], inv));
    }
  }
}

"""
