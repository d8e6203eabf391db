// Vectorized exp, SwiGLU and shifted-exponential sums (see vec_math.h).
#include "engine/backend/cpu/vec_math.h"

#include <immintrin.h>

#include "engine/backend/cpu/bf16_simd.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/exp_simd.h"
#include "engine/backend/cpu/mixed_rowwise.h"

// GCC 12 reports the deliberately undefined pass-through operand inside the unmasked AVX-512
// min/max/roundscale/extract intrinsics as uninitialized (a false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cmath>

namespace air::engine {
namespace {

// The ExpShifted family's loop: e_i = exp(x_scale * x[i] - shift), out[i] = scale * e_i.
__attribute__((target("avx512f,fma"))) double ExpShiftedAvx512(const float* x, float x_scale,
                                                               float shift, float scale, int64_t n,
                                                               float* out) {
  const __m512 vshift = _mm512_set1_ps(shift), vscale = _mm512_set1_ps(scale);
  const __m512 vx_scale = _mm512_set1_ps(x_scale);
  __m512d sum_lo = _mm512_setzero_pd(), sum_hi = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(
        mask,
        Exp16(_mm512_sub_ps(_mm512_mul_ps(vx_scale, _mm512_maskz_loadu_ps(mask, x + i)), vshift)));
    sum_lo = _mm512_add_pd(sum_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    sum_hi = _mm512_add_pd(
        sum_hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    if (out != nullptr) _mm512_mask_storeu_ps(out + i, mask, _mm512_mul_ps(vscale, e));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(sum_lo, sum_hi));
}

// exp(x) for 8 floats with AVX2 + FMA: the same reduction and polynomial as Exp16; 2^n is built
// from the exponent bits in two factors (each a normal float) so that results in the subnormal
// range round once, as scalef does — the two give the same bits.
__attribute__((target("avx2,fma"))) inline __m256 Exp8(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(kExpLow), x);  // NaN in x is returned as is
  x = _mm256_min_ps(_mm256_set1_ps(kExpHigh), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpPoly[i]));
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0f));
  const __m256 n1 = _mm256_floor_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f)));
  const __m256 n2 = _mm256_sub_ps(n, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 f1 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n1), bias), 23));
  const __m256 f2 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n2), bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(y, f1), f2);
}

// Loads the `count` (< 8) floats at src into a zero-padded vector.
__attribute__((target("avx2,fma"))) inline __m256 LoadPartial8(const float* src, int64_t count) {
  alignas(32) float buffer[8] = {};
  for (int64_t i = 0; i < count; ++i) buffer[i] = src[i];
  return _mm256_load_ps(buffer);
}

// The `count` (<= 8) floats at src, zero-padded.
__attribute__((target("avx2,fma"))) inline __m256 LoadUpTo8(const float* src, int64_t count) {
  return count == 8 ? _mm256_loadu_ps(src) : LoadPartial8(src, count);
}

// Stores the first `count` (<= 8) lanes of v to dst.
__attribute__((target("avx2,fma"))) inline void StorePartial8(float* dst, __m256 v, int64_t count) {
  alignas(32) float buffer[8];
  _mm256_store_ps(buffer, v);
  for (int64_t i = 0; i < count; ++i) dst[i] = buffer[i];
}

__attribute__((target("avx2,fma"))) double ExpShiftedAvx2(const float* x, float x_scale,
                                                          float shift, float scale, int64_t n,
                                                          float* out) {
  const __m256 vshift = _mm256_set1_ps(shift), vscale = _mm256_set1_ps(scale);
  const __m256 vx_scale = _mm256_set1_ps(x_scale);
  __m256d sum_lo = _mm256_setzero_pd(), sum_hi = _mm256_setzero_pd();
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t count = std::min<int64_t>(8, n - i);
    const __m256 xv = LoadUpTo8(x + i, count);
    __m256 e = Exp8(_mm256_sub_ps(_mm256_mul_ps(vx_scale, xv), vshift));
    if (count < 8) {  // zero the padding lanes out of the sum
      alignas(32) float keep[8] = {};
      for (int64_t j = 0; j < count; ++j) keep[j] = 1.0f;
      e = _mm256_and_ps(e, _mm256_cmp_ps(_mm256_load_ps(keep), _mm256_setzero_ps(), _CMP_NEQ_OQ));
    }
    sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    if (out != nullptr) {
      const __m256 scaled = _mm256_mul_ps(vscale, e);
      if (count == 8) {
        _mm256_storeu_ps(out + i, scaled);
      } else {
        StorePartial8(out + i, scaled, count);
      }
    }
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(sum_lo, sum_hi));
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

__attribute__((target("avx2,fma"))) inline __m256 Sigmoid8(__m256 g) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, Exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}

__attribute__((target("avx2,fma"))) void SwigluForwardAvx2(const float* gate, const float* up,
                                                           int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t count = std::min<int64_t>(8, n - i);
    const __m256 g = LoadUpTo8(gate + i, count), u = LoadUpTo8(up + i, count);
    const __m256 y = _mm256_mul_ps(_mm256_mul_ps(g, Sigmoid8(g)), u);
    if (count == 8) {
      _mm256_storeu_ps(out + i, y);
    } else {
      StorePartial8(out + i, y, count);
    }
  }
}

__attribute__((target("avx2,fma"))) void SwigluBackwardAvx2(const float* gate, const float* up,
                                                            const float* dout, int64_t n,
                                                            float* dgate, float* dup) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t count = std::min<int64_t>(8, n - i);
    const __m256 g = LoadUpTo8(gate + i, count), u = LoadUpTo8(up + i, count);
    const __m256 d = LoadUpTo8(dout + i, count);
    const __m256 s = Sigmoid8(g);
    const __m256 dsilu = _mm256_mul_ps(s, _mm256_fmadd_ps(g, _mm256_sub_ps(one, s), one));
    const __m256 dg =
        _mm256_add_ps(LoadUpTo8(dgate + i, count), _mm256_mul_ps(_mm256_mul_ps(d, u), dsilu));
    const __m256 du =
        _mm256_add_ps(LoadUpTo8(dup + i, count), _mm256_mul_ps(_mm256_mul_ps(d, g), s));
    if (count == 8) {
      _mm256_storeu_ps(dgate + i, dg);
      _mm256_storeu_ps(dup + i, du);
    } else {
      StorePartial8(dgate + i, dg, count);
      StorePartial8(dup + i, du, count);
    }
  }
}

// max_ps(x, m) returns m when either is NaN: std::max(m, x)'s rule, lane by lane; the lanes'
// maxima are exact, so their order does not matter.
__attribute__((target("avx512f"))) float MaxOfAvx512(const float* x, int64_t n, float start) {
  __m512 m = _mm512_set1_ps(start);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float best = start;
  for (float lane : lanes) best = std::max(best, lane);
  for (; i < n; ++i) best = std::max(best, x[i]);
  return best;
}

__attribute__((target("avx2"))) float MaxOfAvx2(const float* x, int64_t n, float start) {
  __m256 m = _mm256_set1_ps(start);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float best = start;
  for (float lane : lanes) best = std::max(best, lane);
  for (; i < n; ++i) best = std::max(best, x[i]);
  return best;
}

__attribute__((target("avx2,fma"))) double SumOfProductsAvx2(const float* a, const float* b,
                                                             const float* c, int64_t n) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 p = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)),
                                   _mm256_loadu_ps(c + i));
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(lo, hi));
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) sum += a[i] * b[i] * c[i];
  return sum;
}

}  // namespace

void RmsNormBackwardRow(const float* w, const float* dy, const float* x, float inv, float coef,
                        int64_t n, float* dx, double* dw_partial) {
  if (MixedRowwiseRuns()) {
    return RmsNormBackwardRowMixed(w, F32Array(dy), F32Array(x), inv, coef, n, F32Array(dx),
                                   dw_partial);
  }
  for (int64_t c = 0; c < n; ++c) dx[c] += inv * w[c] * dy[c] - coef * x[c];
  for (int64_t c = 0; c < n && dw_partial != nullptr; ++c) dw_partial[c] += dy[c] * x[c] * inv;
}

double SumOfProducts(const float* a, const float* b, const float* c, int64_t n) {
  if (MixedRowwiseRuns()) {
    return SumOfProductsMixed(F32Array(a), F32Array(b), F32Array(c), n);
  }
  if (UseAvx2()) return SumOfProductsAvx2(a, b, c, n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i] * c[i];
  return sum;
}

float MaxOf(const float* x, int64_t n, float start) {
  if (UseAvx512()) return MaxOfAvx512(x, n, start);
  if (UseAvx2()) return MaxOfAvx2(x, n, start);
  for (int64_t i = 0; i < n; ++i) start = std::max(start, x[i]);
  return start;
}

namespace {

double ExpShiftedAnyScale(const float* x, float x_scale, float shift, float scale, int64_t n,
                          float* out) {
  if (UseAvx512()) return ExpShiftedAvx512(x, x_scale, shift, scale, n, out);
  if (UseAvx2()) return ExpShiftedAvx2(x, x_scale, shift, scale, n, out);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(x_scale * x[i] - shift);
    sum += e;
    if (out != nullptr) out[i] = scale * e;
  }
  return sum;
}

}  // namespace

double ExpShifted(const float* x, float shift, float scale, int64_t n, float* out) {
  return ExpShiftedAnyScale(x, 1.0f, shift, scale, n, out);
}

double ExpOfScaled(const float* x, float x_scale, float shift, int64_t n, float* out) {
  return ExpShiftedAnyScale(x, x_scale, shift, 1.0f, n, out);
}

void SwigluForwardRange(const float* gate, const float* up, int64_t n, float* out) {
  if (MixedRowwiseRuns()) {
    return SwigluForwardMixed(F32Array(gate), F32Array(up), n, F32Array(out));
  }
  if (UseAvx2()) return SwigluForwardAvx2(gate, up, n, out);
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void SwigluBackwardRange(const float* gate, const float* up, const float* dout, int64_t n,
                         float* dgate, float* dup) {
  if (MixedRowwiseRuns()) {
    return SwigluBackwardMixed(F32Array(gate), F32Array(up), F32Array(dout), n, F32Array(dgate),
                               F32Array(dup));
  }
  if (UseAvx2()) return SwigluBackwardAvx2(gate, up, dout, n, dgate, dup);
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float sig = 1.0f / (1.0f + std::exp(-g));
    dgate[i] += dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
    dup[i] += dout[i] * g * sig;
  }
}

}  // namespace air::engine
