// Vectorized exp, SwiGLU and shifted-exponential sums (see vec_math.h).
#include "engine/ops/cpu/vec_math.h"

#include <immintrin.h>

#include "engine/ops/cpu/cpu_features.h"

// GCC 12 reports the deliberately undefined pass-through operand inside the unmasked AVX-512
// min/max/roundscale/extract intrinsics as uninitialized (a false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cmath>

namespace air::engine {
namespace {

// exp(x) for 16 floats: n = round(x / ln2), r = x - n ln2 (ln2 split in two for precision),
// exp(r) by a minimax polynomial on [-ln2/2, ln2/2] (the Cephes expf coefficients), times 2^n
// with scalef (which gives 0 and inf at the ends). NaN stays NaN.
__attribute__((target("avx512f,fma"))) inline __m512 Exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-120.0f), x);  // NaN in x is returned as is
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

inline __mmask16 TailMask(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

__attribute__((target("avx512f,fma"))) double ExpShiftedAvx512(const float* x, float shift,
                                                               float scale, int64_t n, float* out) {
  const __m512 vshift = _mm512_set1_ps(shift), vscale = _mm512_set1_ps(scale);
  __m512d sum_lo = _mm512_setzero_pd(), sum_hi = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    const __m512 e =
        _mm512_maskz_mov_ps(mask, Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), vshift)));
    sum_lo = _mm512_add_pd(sum_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    sum_hi = _mm512_add_pd(
        sum_hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    if (out != nullptr) _mm512_mask_storeu_ps(out + i, mask, _mm512_mul_ps(vscale, e));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(sum_lo, sum_hi));
}

__attribute__((target("avx512f,fma"))) __m512 Sigmoid16(__m512 g) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, Exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
}

__attribute__((target("avx512f,fma"))) void SwigluForwardAvx512(const float* gate, const float* up,
                                                                int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(mask, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(mask, up + i);
    _mm512_mask_storeu_ps(out + i, mask, _mm512_mul_ps(_mm512_mul_ps(g, Sigmoid16(g)), u));
  }
}

__attribute__((target("avx512f,fma"))) void SwigluBackwardAvx512(const float* gate, const float* up,
                                                                 const float* dout, int64_t n,
                                                                 float* dgate, float* dup) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = TailMask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(mask, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(mask, up + i);
    const __m512 d = _mm512_maskz_loadu_ps(mask, dout + i);
    const __m512 s = Sigmoid16(g);
    // d * u * s * (1 + g (1 - s))
    const __m512 dsilu = _mm512_mul_ps(s, _mm512_fmadd_ps(g, _mm512_sub_ps(one, s), one));
    const __m512 dg = _mm512_mul_ps(_mm512_mul_ps(d, u), dsilu);
    const __m512 du = _mm512_mul_ps(_mm512_mul_ps(d, g), s);
    _mm512_mask_storeu_ps(dgate + i, mask,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(mask, dgate + i), dg));
    _mm512_mask_storeu_ps(dup + i, mask, _mm512_add_ps(_mm512_maskz_loadu_ps(mask, dup + i), du));
  }
}

bool HasAvx512() { return UseAvx512(); }

}  // namespace

bool VecMathUsesAvx512() { return HasAvx512(); }

double ExpShifted(const float* x, float shift, float scale, int64_t n, float* out) {
  if (HasAvx512()) return ExpShiftedAvx512(x, shift, scale, n, out);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(x[i] - shift);
    sum += e;
    if (out != nullptr) out[i] = scale * e;
  }
  return sum;
}

void SwigluForwardRange(const float* gate, const float* up, int64_t n, float* out) {
  if (HasAvx512()) return SwigluForwardAvx512(gate, up, n, out);
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void SwigluBackwardRange(const float* gate, const float* up, const float* dout, int64_t n,
                         float* dgate, float* dup) {
  if (HasAvx512()) return SwigluBackwardAvx512(gate, up, dout, n, dgate, dup);
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float sig = 1.0f / (1.0f + std::exp(-g));
    dgate[i] += dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
    dup[i] += dout[i] * g * sig;
  }
}

}  // namespace air::engine
