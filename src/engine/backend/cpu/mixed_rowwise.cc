// The AVX-512 kernels over F32-or-BF16 arrays (see mixed_rowwise.h): each a template over its
// arrays' element types (float, or uint16_t for BF16), instantiated per dtype pattern by Typed so
// that the loops hold no dtype tests; whole vectors, then one masked vector for the tail.
#include "engine/backend/cpu/mixed_rowwise.h"

#include <immintrin.h>

#include <cmath>
#include <type_traits>

#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/exp_simd.h"

// GCC 12 reports the deliberately undefined pass-through operand inside the unmasked AVX-512
// min/max/roundscale/extract intrinsics as uninitialized (a false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace air::engine {
namespace {

// Calls fn with each array as a float* (F32) or a uint16_t* (BF16).
template <typename Fn>
void Typed(Fn&& fn) {
  fn();
}
template <typename Fn, typename... Rest>
void Typed(Fn&& fn, Bf16OrF32 first, Rest... rest) {
  if (first.bf16) {
    Typed([&](auto*... typed) { fn(static_cast<uint16_t*>(first.data), typed...); }, rest...);
  } else {
    Typed([&](auto*... typed) { fn(static_cast<float*>(first.data), typed...); }, rest...);
  }
}

// The kernels: compiled for AVX-512 with AVX512-BF16 (the kNative stores' instruction; the
// others use none: there is no __bf16 arithmetic here for the compiler to turn into one), run
// only where MixedRowwiseRuns (and kNative only where NativeBf16Rounding).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")

// StoreF32x16, with vcvtneps2bf16 into BF16 when kNative (bf16_simd.h: the same bits).
template <bool kNative>
__attribute__((always_inline)) inline void Store16(float* dst, __mmask16 mask, __m512 v) {
  StoreF32x16(dst, mask, v);
}
template <bool kNative>
__attribute__((always_inline)) inline void Store16(uint16_t* dst, __mmask16 mask, __m512 v) {
  if constexpr (kNative) {
    StoreF32x16Native(dst, mask, v);
  } else {
    StoreF32x16(dst, mask, v);
  }
}

inline float AsF32(float value) { return value; }
inline float AsF32(uint16_t bf16) { return WidenBf16(bf16); }

// The two fp32 halves of 16 lanes widened to double and added to lo, hi.
__attribute__((always_inline)) inline void AddAsDouble(__m512 v, __m512d& lo, __m512d& hi) {
  lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
  hi = _mm512_add_pd(
      hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

template <bool kNative, typename G, typename U, typename O>
__attribute__((always_inline)) inline void SwigluForward16(const G* gate, const U* up, O* out,
                                                           __mmask16 mask) {
  const __m512 g = LoadF32x16(gate, mask), u = LoadF32x16(up, mask);
  Store16<kNative>(out, mask, _mm512_mul_ps(_mm512_mul_ps(g, Sigmoid16(g)), u));
}

template <bool kNative, typename G, typename U, typename O>
void SwigluForwardLoop(const G* gate, const U* up, O* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) SwigluForward16<kNative>(gate + i, up + i, out + i, 0xFFFF);
  if (i < n) SwigluForward16<kNative>(gate + i, up + i, out + i, TailMask(n - i));
}

template <bool kNative, typename G, typename U, typename D, typename DG, typename DU>
__attribute__((always_inline)) inline void SwigluBackward16(const G* gate, const U* up,
                                                            const D* dout, DG* dgate, DU* dup,
                                                            __mmask16 mask) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 g = LoadF32x16(gate, mask), u = LoadF32x16(up, mask);
  const __m512 d = LoadF32x16(dout, mask);
  const __m512 s = Sigmoid16(g);
  // d * u * s * (1 + g (1 - s))
  const __m512 dsilu = _mm512_mul_ps(s, _mm512_fmadd_ps(g, _mm512_sub_ps(one, s), one));
  const __m512 dg = _mm512_mul_ps(_mm512_mul_ps(d, u), dsilu);
  const __m512 du = _mm512_mul_ps(_mm512_mul_ps(d, g), s);
  Store16<kNative>(dgate, mask, _mm512_add_ps(LoadF32x16(dgate, mask), dg));
  Store16<kNative>(dup, mask, _mm512_add_ps(LoadF32x16(dup, mask), du));
}

template <bool kNative, typename G, typename U, typename D, typename DG, typename DU>
void SwigluBackwardLoop(const G* gate, const U* up, const D* dout, DG* dgate, DU* dup, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    SwigluBackward16<kNative>(gate + i, up + i, dout + i, dgate + i, dup + i, 0xFFFF);
  }
  if (i < n) {
    SwigluBackward16<kNative>(gate + i, up + i, dout + i, dgate + i, dup + i, TailMask(n - i));
  }
}

template <bool kNative, typename Y, typename X>
void AddLoop(Y* y, const X* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Store16<kNative>(y + i, 0xFFFF,
                     _mm512_add_ps(LoadF32x16(y + i, 0xFFFF), LoadF32x16(x + i, 0xFFFF)));
  }
  if (i < n) {
    const __mmask16 mask = TailMask(n - i);
    Store16<kNative>(y + i, mask, _mm512_add_ps(LoadF32x16(y + i, mask), LoadF32x16(x + i, mask)));
  }
}

template <bool kNative, typename X, typename Y>
float RmsNormForwardRowLoop(const X* x, const float* w, float eps, int64_t n, Y* y) {
  // FastOps' scalar loop: partial[u] += x[c + u]^2 over whole groups of eight, so lane u of an
  // 8-lane sum, the groups added in order.
  __m256 partial = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    const __m512 v = LoadF32x16(x + c, 0xFFFF);
    const __m512 squares = _mm512_mul_ps(v, v);
    partial = _mm256_add_ps(partial, _mm512_castps512_ps256(squares));
    partial = _mm256_add_ps(partial,
                            _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(squares), 1)));
  }
  if (c + 8 <= n) {
    const __m512 v = LoadF32x16(x + c, 0x00FF);
    partial = _mm256_add_ps(partial, _mm512_castps512_ps256(_mm512_mul_ps(v, v)));
    c += 8;
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, partial);
  double sum_sq = 0.0;
  for (float lane : lanes) sum_sq += lane;
  for (; c < n; ++c) sum_sq += static_cast<double>(AsF32(x[c])) * AsF32(x[c]);
  const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
  const __m512 inv16 = _mm512_set1_ps(inv);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 scaled = _mm512_mul_ps(LoadF32x16(x + i, 0xFFFF), inv16);
    Store16<kNative>(y + i, 0xFFFF, _mm512_mul_ps(LoadF32x16(w + i, 0xFFFF), scaled));
  }
  if (i < n) {
    const __mmask16 mask = TailMask(n - i);
    const __m512 scaled = _mm512_mul_ps(LoadF32x16(x + i, mask), inv16);
    Store16<kNative>(y + i, mask, _mm512_mul_ps(LoadF32x16(w + i, mask), scaled));
  }
  return inv;
}

template <bool kNative, typename A, typename B, typename C>
double SumOfProductsLoop(const A* a, const B* b, const C* c, int64_t n) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    AddAsDouble(_mm512_mul_ps(_mm512_mul_ps(LoadF32x16(a + i, 0xFFFF), LoadF32x16(b + i, 0xFFFF)),
                              LoadF32x16(c + i, 0xFFFF)),
                lo, hi);
  }
  if (i < n) {
    const __mmask16 mask = TailMask(n - i);
    AddAsDouble(_mm512_mul_ps(_mm512_mul_ps(LoadF32x16(a + i, mask), LoadF32x16(b + i, mask)),
                              LoadF32x16(c + i, mask)),
                lo, hi);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}

template <bool kNative, typename DY, typename X, typename DX>
__attribute__((always_inline)) inline void RmsNormBackward16(const float* w, const DY* dy,
                                                             const X* x, __m512 inv16,
                                                             __m512 coef16, DX* dx,
                                                             double* dw_partial, __mmask16 mask) {
  const __m512 dyv = LoadF32x16(dy, mask), xv = LoadF32x16(x, mask);
  // inv * w * dy - coef * x, added to dx
  const __m512 term = _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(inv16, LoadF32x16(w, mask)), dyv),
                                    _mm512_mul_ps(coef16, xv));
  Store16<kNative>(dx, mask, _mm512_add_ps(LoadF32x16(dx, mask), term));
  if (dw_partial == nullptr) return;
  const __m512 g = _mm512_mul_ps(_mm512_mul_ps(dyv, xv), inv16);
  if (mask == 0xFFFF) {
    __m512d lo = _mm512_loadu_pd(dw_partial), hi = _mm512_loadu_pd(dw_partial + 8);
    AddAsDouble(g, lo, hi);
    _mm512_storeu_pd(dw_partial, lo);
    _mm512_storeu_pd(dw_partial + 8, hi);
    return;
  }
  const auto mask_lo = static_cast<__mmask8>(mask), mask_hi = static_cast<__mmask8>(mask >> 8);
  __m512d lo = _mm512_maskz_loadu_pd(mask_lo, dw_partial);
  __m512d hi = _mm512_maskz_loadu_pd(mask_hi, dw_partial + 8);
  AddAsDouble(g, lo, hi);
  _mm512_mask_storeu_pd(dw_partial, mask_lo, lo);
  _mm512_mask_storeu_pd(dw_partial + 8, mask_hi, hi);
}

template <bool kNative, typename DY, typename X, typename DX>
void RmsNormBackwardRowLoop(const float* w, const DY* dy, const X* x, float inv, float coef,
                            int64_t n, DX* dx, double* dw_partial) {
  const __m512 inv16 = _mm512_set1_ps(inv), coef16 = _mm512_set1_ps(coef);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    RmsNormBackward16<kNative>(w + i, dy + i, x + i, inv16, coef16, dx + i,
                               dw_partial == nullptr ? nullptr : dw_partial + i, 0xFFFF);
  }
  if (i < n) {
    RmsNormBackward16<kNative>(w + i, dy + i, x + i, inv16, coef16, dx + i,
                               dw_partial == nullptr ? nullptr : dw_partial + i, TailMask(n - i));
  }
}

#pragma GCC pop_options

// Calls body(std::true_type or std::false_type): the kernels' kNative.
template <typename Body>
void WithRounding(Body&& body) {
  if (NativeBf16Rounding()) {
    body(std::true_type{});
  } else {
    body(std::false_type{});
  }
}

}  // namespace

// AVX-512 with BW, VL and DQ (the kernels are compiled with them: every AVX-512 CPU but Xeon
// Phi has them).
bool MixedRowwiseRuns() {
  static const bool bw_vl_dq = __builtin_cpu_supports("avx512bw") &&
                               __builtin_cpu_supports("avx512vl") &&
                               __builtin_cpu_supports("avx512dq");
  return UseAvx512() && bw_vl_dq;
}

void SwigluForwardMixed(Bf16OrF32 gate, Bf16OrF32 up, int64_t n, Bf16OrF32 out) {
  WithRounding([&](auto native) {
    Typed([&](auto* g, auto* u, auto* o) { SwigluForwardLoop<native()>(g, u, o, n); }, gate, up,
          out);
  });
}

void SwigluBackwardMixed(Bf16OrF32 gate, Bf16OrF32 up, Bf16OrF32 dout, int64_t n, Bf16OrF32 dgate,
                         Bf16OrF32 dup) {
  WithRounding([&](auto native) {
    Typed([&](auto* g, auto* u, auto* d, auto* dg,
              auto* du) { SwigluBackwardLoop<native()>(g, u, d, dg, du, n); },
          gate, up, dout, dgate, dup);
  });
}

void AddMixed(Bf16OrF32 y, Bf16OrF32 x, int64_t n) {
  WithRounding(
      [&](auto native) { Typed([&](auto* ys, auto* xs) { AddLoop<native()>(ys, xs, n); }, y, x); });
}

float RmsNormForwardRowMixed(Bf16OrF32 x, const float* w, float eps, int64_t n, Bf16OrF32 y) {
  float inv = 0.0f;
  WithRounding([&](auto native) {
    Typed([&](auto* xs, auto* ys) { inv = RmsNormForwardRowLoop<native()>(xs, w, eps, n, ys); }, x,
          y);
  });
  return inv;
}

double SumOfProductsMixed(Bf16OrF32 a, Bf16OrF32 b, Bf16OrF32 c, int64_t n) {
  double sum = 0.0;
  Typed([&](auto* as, auto* bs, auto* cs) { sum = SumOfProductsLoop<false>(as, bs, cs, n); }, a, b,
        c);
  return sum;
}

void RmsNormBackwardRowMixed(const float* w, Bf16OrF32 dy, Bf16OrF32 x, float inv, float coef,
                             int64_t n, Bf16OrF32 dx, double* dw_partial) {
  WithRounding([&](auto native) {
    Typed(
        [&](auto* dys, auto* xs, auto* dxs) {
          RmsNormBackwardRowLoop<native()>(w, dys, xs, inv, coef, n, dxs, dw_partial);
        },
        dy, x, dx);
  });
}

}  // namespace air::engine
