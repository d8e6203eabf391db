// Packing for the bf16 GEMM (gemm_mixed.h): F32 or BF16 operands into the micro-kernels'
// panels (gemm_kernels.h), every value rounded to bf16 on the way (round to nearest even, as
// dtype.h's F32ToBf16). A and B panels are the same operation: a panel is `width` lanes (rows
// of op(A), or columns of op(B)) by kc steps of K, lane w and step p read from the stored
// matrix at data[w * ld + p] when K is contiguous (A as stored (M, K), B as stored (N, K)),
// else at data[p * ld + w]. Lanes past `lanes` (the matrix's last) are zero; so is the pad
// step of an odd kc in a pair panel.
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>

#include "engine/backend/cpu/bf16_simd.h"

namespace air::engine {

struct PanelSource {
  const void* data;  // float* or uint16_t* (bf16 bits)
  bool bf16;
  int64_t ld;
  bool k_contiguous;
  int64_t lanes;  // M for A, N for B
  // A dropped operand (GemmOperand's drop): element i of the stored matrix, i = row * ld +
  // column, is taken as ApplyDropoutMask gives it, RoundToBf16(bit i ? x * drop_scale : 0).
  // Pair panels only. Null: none.
  const uint8_t* drop_bits = nullptr;
  int64_t drop_bytes = 0;
  float drop_scale = 1.0f;
  // An F32 source's values packed as they are, not rounded to bf16 (fast_gemm's fp32 GEMM;
  // float panels only).
  bool f32_exact = false;
};

// Element (lane w, step p) of the source, absolute indices, as bf16 bits.
inline uint16_t Bf16At(const PanelSource& s, int64_t w, int64_t p) {
  const int64_t index = s.k_contiguous ? w * s.ld + p : p * s.ld + w;
  if (s.drop_bits != nullptr) {
    const float x = s.bf16 ? WidenBf16(static_cast<const uint16_t*>(s.data)[index])
                           : static_cast<const float*>(s.data)[index];
    const bool keep = (s.drop_bits[index / 8] >> (index % 8)) & 1u;
    return RoundToBf16(keep ? x * s.drop_scale : 0.0f);
  }
  if (s.bf16) return static_cast<const uint16_t*>(s.data)[index];
  return RoundToBf16(static_cast<const float*>(s.data)[index]);
}

// Both pack lanes [w0, w0 + count) into ceil(count / width) consecutive panels of `width`
// lanes (the micro-kernel's MR or NR).
// Float panels (gemm_mixed_pack_float.cc): dst[p][w] (kc x width floats), the values
// rounded to bf16 and widened back (f32_exact: as they are). Portable loops, or AVX2 (for CPUs
// that have it).
void PackFloatPanels(const PanelSource& src, int64_t width, int64_t w0, int64_t count, int64_t p0,
                     int64_t kc, float* dst);
void PackFloatPanelsAvx2(const PanelSource& src, int64_t width, int64_t w0, int64_t count,
                         int64_t p0, int64_t kc, float* dst);

// Pair panels (gemm_mixed_pack.cc; width a multiple of 8): dst[q][w] (ceil(kc / 2) x width
// words), bf16 of step 2q in the low half, 2q + 1 in the high. Uses AVX-512 (BW, VL, DQ and
// BF16's vcvtneps2bf16 for a dropped operand): for CPUs that run the avx512bf16 path only.
void PackPairPanels(const PanelSource& src, int64_t width, int64_t w0, int64_t count, int64_t p0,
                    int64_t kc, uint32_t* dst);
// A dropped operand whose K is contiguous (A stored (M, K)), into panels of `width` rows laid
// out as an in-place A is read: row r of a panel at r * ceil(kc / 2) words, its pairs in step
// order (the mask applied; zeros past the matrix and in an odd kc's pad). A plain transposed
// pair panel would cost an 8 x 8 transpose a block for a product that reads each word once.
// AVX-512 with BW, VL, DQ and BF16, as PackPairPanels.
void PackPairRowsDropped(const PanelSource& src, int64_t width, int64_t w0, int64_t count,
                         int64_t p0, int64_t kc, uint32_t* dst);

}  // namespace air::engine
