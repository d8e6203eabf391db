// The vectorized exp of the fast CPU path (vec_math.h's exponentials, SwiGLU's sigmoid in
// vec_math.cc and mixed_rowwise.cc): its constants and the AVX-512 form, inline for the loops
// that call it per vector. Compiled for AVX-512 only: callers run it on CPUs that have it.
// Thread safety: pure functions.
#pragma once

#include <immintrin.h>

namespace air::engine {

// exp's constants: log2(e); ln 2 split in a part exact in few bits and the rest; the Cephes expf
// polynomial for e^r - 1 - r = r^2 (c0 + c1 r + ... + c5 r^5), highest degree first.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                               4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
constexpr float kExpLow = -120.0f;  // exp is 0 in float below about -103.3
constexpr float kExpHigh = 89.0f;   // and inf above about 88.7

// exp(x) for 16 floats: n = round(x / ln2), r = x - n ln2 (ln2 split in two for precision),
// exp(r) by a minimax polynomial on [-ln2/2, ln2/2] (the Cephes expf coefficients), times 2^n
// with scalef (which gives 0 and inf at the ends). NaN stays NaN.
__attribute__((target("avx512f,fma"))) inline __m512 Exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(kExpLow), x);  // NaN in x is returned as is
  x = _mm512_min_ps(_mm512_set1_ps(kExpHigh), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[i]));
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

// 1 / (1 + exp(-g)) for 16 floats.
__attribute__((target("avx512f,fma"))) inline __m512 Sigmoid16(__m512 g) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, Exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
}

}  // namespace air::engine
