// FastOps' optimizer ops (see ops.h): AdamW's elementwise update, sums of squares for the
// gradient norm, and scaling, each split into contiguous chunks over the thread pool and
// vectorized with AVX-512 when the CPU has it. The AdamW update uses the reference's exact
// operation order without fused multiply-adds, so it gives the reference's bits.
#include <immintrin.h>

#include "engine/ops/cpu/cpu_features.h"

// GCC 12 reports the undefined pass-through operand inside unmasked AVX-512 extract
// intrinsics as uninitialized (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cmath>
#include <vector>

#include "engine/ops/cpu/fast_ops.h"

namespace air::engine {
namespace {

constexpr int64_t kMinChunk = 1 << 15;  // elements per thread below which one thread does it

inline __mmask16 TailMask(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

__attribute__((target("avx512f"))) void AdamWAvx512(const AdamWScalars& s, int64_t n, float* p,
                                                    const float* g, float* m, float* v) {
  const __m512 decay = _mm512_set1_ps(s.decay_factor), omb1 = _mm512_set1_ps(s.one_minus_beta1);
  const __m512 beta2 = _mm512_set1_ps(s.beta2), omb2 = _mm512_set1_ps(s.one_minus_beta2);
  const __m512 bc2 = _mm512_set1_ps(s.bias_correction2_sqrt), eps = _mm512_set1_ps(s.eps);
  const __m512 step = _mm512_set1_ps(s.step_size);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = TailMask(n - j);
    __m512 pv = _mm512_maskz_loadu_ps(k, p + j);
    const __m512 gv = _mm512_maskz_loadu_ps(k, g + j);
    __m512 mv = _mm512_maskz_loadu_ps(k, m + j);
    __m512 vv = _mm512_maskz_loadu_ps(k, v + j);
    if (s.decay) pv = _mm512_mul_ps(pv, decay);
    mv = _mm512_add_ps(mv, _mm512_mul_ps(omb1, _mm512_sub_ps(gv, mv)));
    vv = _mm512_add_ps(_mm512_mul_ps(vv, beta2), _mm512_mul_ps(_mm512_mul_ps(omb2, gv), gv));
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vv), bc2), eps);
    pv = _mm512_sub_ps(pv, _mm512_mul_ps(step, _mm512_div_ps(mv, denom)));
    _mm512_mask_storeu_ps(p + j, k, pv);
    _mm512_mask_storeu_ps(m + j, k, mv);
    _mm512_mask_storeu_ps(v + j, k, vv);
  }
}

__attribute__((target("avx512f"))) double SumOfSquaresAvx512(const float* x, int64_t n) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t j = 0; j < n; j += 16) {
    const __m512 xv = _mm512_maskz_loadu_ps(TailMask(n - j), x + j);
    const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(xv));
    const __m512d b =
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xv), 1)));
    lo = _mm512_add_pd(lo, _mm512_mul_pd(a, a));  // float * float is exact in double
    hi = _mm512_add_pd(hi, _mm512_mul_pd(b, b));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}

bool HasAvx512() { return UseAvx512(); }

}  // namespace

void FastOps::AdamWUpdate(const AdamWScalars& s, int64_t n, float* p, const float* g, float* m,
                          float* v) const {
  pool_->ParallelFor(n, kMinChunk, [&](int64_t begin, int64_t end, int) {
    if (HasAvx512()) return AdamWAvx512(s, end - begin, p + begin, g + begin, m + begin, v + begin);
    ReferenceOps::AdamWUpdate(s, end - begin, p + begin, g + begin, m + begin, v + begin);
  });
}

double FastOps::SumOfSquares(const float* x, int64_t n) const {
  std::vector<double> partial(static_cast<size_t>(pool_->num_threads()), 0.0);
  pool_->ParallelFor(n, kMinChunk, [&](int64_t begin, int64_t end, int thread) {
    partial[static_cast<size_t>(thread)] = HasAvx512()
                                               ? SumOfSquaresAvx512(x + begin, end - begin)
                                               : ReferenceOps::SumOfSquares(x + begin, end - begin);
  });
  double total = 0.0;
  for (double value : partial) total += value;  // in thread order: deterministic
  return total;
}

void FastOps::Scale(float* x, int64_t n, float factor) const {
  pool_->ParallelFor(n, kMinChunk, [&](int64_t begin, int64_t end, int) {
    for (int64_t j = begin; j < end; ++j) x[j] *= factor;
  });
}

}  // namespace air::engine
