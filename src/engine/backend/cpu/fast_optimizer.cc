// FastOps' optimizer ops (see ops.h): AdamW's elementwise update (with the compute copy of the
// updated parameters written in the same pass), sums of squares for the gradient norm, and
// scaling, each split into chunks over the thread pool and vectorized with AVX-512 or AVX2 when
// the CPU has them (cpu_features.h). The AdamW update uses the reference's exact operation order
// without fused multiply-adds, so it gives the reference's bits.
#include <immintrin.h>

#include "engine/backend/cpu/bf16_simd.h"
#include "engine/backend/cpu/convert.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/mixed_rowwise.h"

// GCC 12 reports the undefined pass-through operand inside unmasked AVX-512 extract
// intrinsics as uninitialized (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/backend/cpu/fast_ops.h"
#include "engine/backend/cpu/reference_loops.h"
#include "engine/backend/cpu/reference_ops.h"

namespace air::engine {
namespace {

constexpr int64_t kMinChunk = 1 << 15;  // elements per thread below which one thread does it

// copy16, when not null, gets the updated p rounded to bf16 (as RoundToBf16 rounds).
__attribute__((target("avx512f"))) void AdamWAvx512(const AdamWScalars& s, int64_t n, float* p,
                                                    const float* g, float* m, float* v,
                                                    uint16_t* copy16) {
  const __m512 decay = _mm512_set1_ps(s.decay_factor), omb1 = _mm512_set1_ps(s.one_minus_beta1);
  const __m512 beta2 = _mm512_set1_ps(s.beta2), omb2 = _mm512_set1_ps(s.one_minus_beta2);
  const __m512 bc2 = _mm512_set1_ps(s.bias_correction2_sqrt), eps = _mm512_set1_ps(s.eps);
  const __m512 step = _mm512_set1_ps(s.step_size), scale = _mm512_set1_ps(s.grad_scale);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = TailMask(n - j);
    __m512 pv = _mm512_maskz_loadu_ps(k, p + j);
    const __m512 gv = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, g + j), scale);
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
    if (copy16 != nullptr) {
      _mm512_mask_cvtepi32_storeu_epi16(copy16 + j, k, RoundToBf16x16(pv));  // AVX-512F
    }
  }
}

// lo, hi += the squares of xv's low and high 8 floats, in double (float * float is exact).
__attribute__((target("avx512f"), always_inline)) inline void AddSquares(__m512 xv, __m512d& lo,
                                                                         __m512d& hi) {
  const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(xv));
  const __m512d b =
      _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xv), 1)));
  lo = _mm512_add_pd(lo, _mm512_mul_pd(a, a));
  hi = _mm512_add_pd(hi, _mm512_mul_pd(b, b));
}

// Four vectors of 16 per step into eight double accumulators: with two, the loop waited on the
// adds' latency (6.8 GB/s on one Zen 5 core, a third of what AdamW streams).
// x F32 or (uint16_t) BF16, widened in registers (bf16_simd.h's LoadF32x16: AVX512BW and VL
// too, so run where mixed_rowwise.h's MixedRowwiseRuns).
template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"))) double SumOfSquaresAvx512(const T* x,
                                                                               int64_t n) {
  __m512d acc[8];
  for (__m512d& a : acc) a = _mm512_setzero_pd();
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v)
      AddSquares(LoadF32x16(x + j + 16 * v, 0xFFFF), acc[2 * v], acc[2 * v + 1]);
  }
  for (; j < n; j += 16) AddSquares(LoadF32x16(x + j, TailMask(n - j)), acc[0], acc[1]);
  const __m512d sum =
      _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3])),
                    _mm512_add_pd(_mm512_add_pd(acc[4], acc[5]), _mm512_add_pd(acc[6], acc[7])));
  return _mm512_reduce_add_pd(sum);
}

// The AVX2 versions: whole vectors of 8, the rest by the reference loop (the same bits).
__attribute__((target("avx2"))) int64_t AdamWAvx2(const AdamWScalars& s, int64_t n, float* p,
                                                  const float* g, float* m, float* v) {
  const __m256 decay = _mm256_set1_ps(s.decay_factor), omb1 = _mm256_set1_ps(s.one_minus_beta1);
  const __m256 beta2 = _mm256_set1_ps(s.beta2), omb2 = _mm256_set1_ps(s.one_minus_beta2);
  const __m256 bc2 = _mm256_set1_ps(s.bias_correction2_sqrt), eps = _mm256_set1_ps(s.eps);
  const __m256 step = _mm256_set1_ps(s.step_size), scale = _mm256_set1_ps(s.grad_scale);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 pv = _mm256_loadu_ps(p + j);
    const __m256 gv = _mm256_mul_ps(_mm256_loadu_ps(g + j), scale);
    __m256 mv = _mm256_loadu_ps(m + j);
    __m256 vv = _mm256_loadu_ps(v + j);
    if (s.decay) pv = _mm256_mul_ps(pv, decay);
    mv = _mm256_add_ps(mv, _mm256_mul_ps(omb1, _mm256_sub_ps(gv, mv)));
    vv = _mm256_add_ps(_mm256_mul_ps(vv, beta2), _mm256_mul_ps(_mm256_mul_ps(omb2, gv), gv));
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vv), bc2), eps);
    pv = _mm256_sub_ps(pv, _mm256_mul_ps(step, _mm256_div_ps(mv, denom)));
    _mm256_storeu_ps(p + j, pv);
    _mm256_storeu_ps(m + j, mv);
    _mm256_storeu_ps(v + j, vv);
  }
  return j;  // elements done
}

// The same over vectors of 8: four per step into eight accumulators, the last floats scalar.
__attribute__((target("avx2"), always_inline)) inline void AddSquaresAvx2(__m256 xv, __m256d& lo,
                                                                          __m256d& hi) {
  const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(xv));
  const __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1));
  lo = _mm256_add_pd(lo, _mm256_mul_pd(a, a));
  hi = _mm256_add_pd(hi, _mm256_mul_pd(b, b));
}

__attribute__((target("avx2"))) double SumOfSquaresAvx2(const float* x, int64_t n) {
  __m256d acc[8];
  for (__m256d& a : acc) a = _mm256_setzero_pd();
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      AddSquaresAvx2(_mm256_loadu_ps(x + j + 8 * v), acc[2 * v], acc[2 * v + 1]);
    }
  }
  for (; j + 8 <= n; j += 8) AddSquaresAvx2(_mm256_loadu_ps(x + j), acc[0], acc[1]);
  const __m256d total =
      _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])),
                    _mm256_add_pd(_mm256_add_pd(acc[4], acc[5]), _mm256_add_pd(acc[6], acc[7])));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, total);
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; j < n; ++j) sum += static_cast<double>(x[j]) * x[j];
  return sum;
}

}  // namespace

// AdamW over state of which some is BF16 (torch_dtype bfloat16): pieces widened into fp32,
// updated by the F32 kernel (the reference's bits), rounded back once — AdamWElement's result.
void FastOps::AdamWStaged(const AdamWScalars& s, const View& pv, const View& gv, const View& mv,
                          const View& vv, const View& p_copy) const {
  constexpr int64_t kPiece = 4096;
  pool_->ParallelForBalanced(pv.numel(), kMinChunk, [&](int64_t begin, int64_t end, int) {
    std::vector<float> staged(4 * kPiece);
    float *p = staged.data(), *g = p + kPiece, *m = g + kPiece, *v = m + kPiece;
    for (int64_t at = begin; at < end; at += kPiece) {
      const int64_t count = std::min(kPiece, end - at);
      LoadF32(pv, at, count, p);
      LoadF32(gv, at, count, g);
      LoadF32(mv, at, count, m);
      LoadF32(vv, at, count, v);
      int64_t done = UseAvx2() && !UseAvx512() ? AdamWAvx2(s, count, p, g, m, v) : 0;
      if (UseAvx512()) {
        AdamWAvx512(s, count, p, g, m, v, nullptr);
        done = count;
      }
      RefAdamWUpdate(s, count - done, p + done, g + done, m + done, v + done);
      StoreF32(p, pv, at, count);
      StoreF32(m, mv, at, count);
      StoreF32(v, vv, at, count);
      if (!p_copy.empty()) StoreF32(p, p_copy, at, count);
    }
  });
}

void FastOps::AdamWUpdateKernel(const AdamWScalars& s, const View& pv, const View& gv,
                                const View& mv, const View& vv, const View& p_copy) const {
  for (const View* x : {&pv, &gv, &mv, &vv}) {
    if (x->dtype() != DType::kF32) return AdamWStaged(s, pv, gv, mv, vv, p_copy);
  }
  const int64_t n = pv.numel();
  float *p = pv.f32(), *m = mv.f32(), *v = vv.f32();
  const float* g = gv.f32();
  uint16_t* copy16 = !p_copy.empty() && p_copy.dtype() == DType::kBF16 ? p_copy.bf16() : nullptr;
  // Balanced: each element's update is the same whichever thread makes it.
  pool_->ParallelForBalanced(n, kMinChunk, [&](int64_t begin, int64_t end, int) {
    if (UseAvx512()) {
      AdamWAvx512(s, end - begin, p + begin, g + begin, m + begin, v + begin,
                  copy16 == nullptr ? nullptr : copy16 + begin);
      if (copy16 != nullptr || p_copy.empty()) return;
    } else {
      int64_t done = 0;
      if (UseAvx2()) done = AdamWAvx2(s, end - begin, p + begin, g + begin, m + begin, v + begin);
      const int64_t at = begin + done;
      RefAdamWUpdate(s, end - at, p + at, g + at, m + at, v + at);
    }
    // The copy of this piece while it is in cache (BF16 by the vectorized rounding; F32 as is).
    if (!p_copy.empty()) StoreF32(p + begin, p_copy, begin, end - begin);
  });
}

void FastOps::SumOfSquaresKernel(const View& xv, const View& sum_view) const {
  // AVX-512 reads bf16 gradients as they are; else each piece is widened first.
  const bool in_registers = MixedRowwiseRuns();
  const bool widened = xv.dtype() != DType::kF32 && !in_registers;
  const float* x = xv.dtype() != DType::kF32 ? nullptr : xv.f32();
  const int64_t n = xv.numel();
  double* sum_out = sum_view.f64();
  // One partial sum per piece of kMinChunk elements, added in piece order: the same bits
  // whatever the thread count or which thread summed a piece (so the pieces may be balanced).
  const int64_t pieces = std::max<int64_t>(1, (n + kMinChunk - 1) / kMinChunk);
  std::vector<double> partial(static_cast<size_t>(pieces), 0.0);
  pool_->ParallelForBalanced(n, kMinChunk, [&](int64_t begin, int64_t end, int) {
    std::vector<float> piece(widened ? static_cast<size_t>(kMinChunk) : 0);
    for (int64_t at = begin; at < end; at += kMinChunk) {
      const int64_t count = std::min(kMinChunk, end - at);
      const float* chunk = widened ? piece.data() : x + at;
      if (widened) LoadF32(xv, at, count, piece.data());
      double sum;
      if (in_registers) {
        sum = x != nullptr ? SumOfSquaresAvx512(x + at, count)
                           : SumOfSquaresAvx512(xv.bf16() + at, count);
      } else if (UseAvx2()) {
        sum = SumOfSquaresAvx2(chunk, count);
      } else {
        sum = SumOfSquaresLoop(chunk, count);
      }
      partial[static_cast<size_t>(at / kMinChunk)] = sum;
    }
  });
  double total = 0.0;
  for (double value : partial) total += value;  // in piece order: deterministic
  *sum_out += total;
}

void FastOps::ScaleKernel(const View& xv, float factor) const {
  const int64_t n = xv.numel();
  if (xv.dtype() != DType::kF32) {  // bf16 state: one fp32 product, rounded once
    pool_->ParallelFor(n, kMinChunk, [&](int64_t begin, int64_t end, int) {
      std::vector<float> x(static_cast<size_t>(end - begin));
      LoadF32(xv, begin, end - begin, x.data());
      for (float& value : x) value *= factor;
      StoreF32(x.data(), xv, begin, end - begin);
    });
    return;
  }
  float* x = xv.f32();
  pool_->ParallelFor(n, kMinChunk, [&](int64_t begin, int64_t end, int) {
    for (int64_t j = begin; j < end; ++j) x[j] *= factor;
  });
}

}  // namespace air::engine
