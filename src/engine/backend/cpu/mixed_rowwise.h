// Elementwise and row kernels whose arrays are each F32 or BF16, converting bf16 in registers:
// 16 elements loaded (widened when BF16), computed in fp32, rounded and stored (bf16_simd.h's
// LoadF32x16 / StoreF32x16, and at the avx512bf16 kernel level vcvtneps2bf16's rounding).
// FastOps' SwiGLU, residual add and RMSNorm rows take them where they run, instead of widening
// BF16 rows into per-thread fp32 scratch and rounding the results back through it (convert.h's
// ReadF32 / WriteF32 / CommitF32): those extra passes over memory, and the rounding's seven
// integer operations per vector, were most of these ops' time in a bf16 step (docs/performance.md,
// "Zen 4"). Each kernel gives exactly the staged path's bits: per element the same fp32
// operations in the same order, and a row's sums in the same order (vec_math.h's AVX-512 fp32
// kernels are these kernels on F32 arrays). Hand-written AVX-512 (F, BW, VL, DQ); at lower
// kernel levels (AIR_CPU_KERNELS) callers keep the staged path (MixedRowwiseRuns).
// Thread safety: pure functions over their arguments.
#pragma once

#include <cstdint>

#include "engine/backend/cpu/bf16_simd.h"
#include "engine/view.h"

namespace air::engine {

// Whether the kernels below run at the selected kernel level (AVX-512 with BW, VL and DQ).
bool MixedRowwiseRuns();

// Elements [offset, ...) of a data view (F32 or BF16).
inline Bf16OrF32 MixedAt(const View& v, int64_t offset) {
  if (v.dtype() == DType::kF32) return {v.f32() + offset, false};
  return {v.bf16() + offset, true};
}

// An fp32 array (vec_math.h's kernels: these on F32 arrays); the kernels write only their
// outputs.
inline Bf16OrF32 F32Array(const float* data) { return {const_cast<float*>(data), false}; }

// out[i] = silu(gate[i]) * up[i] (vec_math.h's SwigluForwardRange).
void SwigluForwardMixed(Bf16OrF32 gate, Bf16OrF32 up, int64_t n, Bf16OrF32 out);
// dgate[i] += dout[i] * up[i] * s (1 + g (1 - s)), dup[i] += dout[i] * g * s (each sum in fp32,
// rounded once).
void SwigluBackwardMixed(Bf16OrF32 gate, Bf16OrF32 up, Bf16OrF32 dout, int64_t n, Bf16OrF32 dgate,
                         Bf16OrF32 dup);
// y[i] += x[i].
void AddMixed(Bf16OrF32 y, Bf16OrF32 x, int64_t n);

// RMSNorm's forward over one row: y[i] = w[i] * (x[i] * rstd); returns rstd =
// 1 / sqrt(sum of squares / n + eps), the sum of squares taken as FastOps' loop takes it (eight
// fp32 partial sums over the whole groups of eight, added in double in lane order, then the rest
// in double).
float RmsNormForwardRowMixed(Bf16OrF32 x, const float* w, float eps, int64_t n, Bf16OrF32 y);
// The sum of a[i] * b[i] * c[i] (vec_math.h's SumOfProducts).
double SumOfProductsMixed(Bf16OrF32 a, Bf16OrF32 b, Bf16OrF32 c, int64_t n);
// RMSNorm's backward over one row (vec_math.h's RmsNormBackwardRow; dx accumulates).
void RmsNormBackwardRowMixed(const float* w, Bf16OrF32 dy, Bf16OrF32 x, float inv, float coef,
                             int64_t n, Bf16OrF32 dx, double* dw_partial);

}  // namespace air::engine
