// The fast CPU path's fp32 GEMM for products with a side of at most 16: C = op(A) op(B) + beta C
// where N <= 16 (LoRA's down product dy B), M <= 16 (its adapter gradients) or K <= 16 (its up
// products u B^T, du A) — the products of fp32 operands (FastOps takes the bf16 GEMM, gemm_mixed.h,
// where an operand is BF16: its vdpbf16ps tiles measured faster on these shapes; on the avx512
// conversion path, NarrowGemmBf16 below). The blocked
// fp32 GEMM (fast_gemm.h) tiles C in register blocks of 32 or 48 columns with packed panels, so
// such products ran at 32-40 GFLOP/s (N or M 16) against 96-100 here on one Zen 4 core
// (bench/gemm, CPU clock): half a tile or more wasted, packing that costs more than the
// product. Here the narrow operand is packed once into K rows of 16 floats (zero past its
// width). The other operand streams 16 rows as one vector against each packed element
// broadcast (one FMA per element; AVX-512), in slices of 256 steps of K that stay in L1: read
// in place where its rows are contiguous (a transposed one: dy^T and x^T in LoRA's adapter
// gradients; its lines prefetched 16 steps ahead, two tiles a slice), transposed 16 x 16 into a
// slice buffer where K is contiguous and it is BF16 or rounded (x and dy in x A^T and dy B). On
// one Intel core, BF16 operand: 46-56 -> 83-131 GFLOP/s (rows contiguous), 63-67 -> 83 (K
// contiguous); F32: 49-53 -> 103-119. An F32 operand with K contiguous streams 8 rows at a time
// in place, each element broadcast against one packed row. K <= 16 is a rank-K update of C, 8
// rows and 16 columns at a time.
//
// Semantics are FastOps::Gemm's for fp32 operands: fp32 FMA sums in ascending K, beta * C read
// as fp32 and added once after the sum (beta 0 ignores C, NaN too), a BF16 C rounded once
// (to nearest even). Each element of C is computed by one task: the same bits for every thread
// count. Used only where the kernels are AVX-512 (NarrowGemmApplies); on AVX2 kernels the
// blocked GEMM reads such a product's wide operand in place instead (fast_gemm.cc).
// Thread safety: one call per scratch at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/backend/cpu/thread_pool.h"

namespace air::engine {

inline constexpr int64_t kNarrowGemmWidth = 16;

// The packed narrow operand, and per thread a slice of the streamed rows transposed to fp32 (a
// BF16 or rounded operand with K contiguous), reused across calls.
struct NarrowGemmScratch {
  std::vector<float> packed;
  std::vector<std::vector<float>> rows;
};

// Whether NarrowGemm runs this product on this CPU: AVX-512 kernels and a side of at most 16
// (K > 0, M and N > 0).
bool NarrowGemmApplies(int64_t m, int64_t n, int64_t k);

// C (M, N) = op(A) op(B) + beta C with Ops::Gemm's transposes and leading dimensions; A and B
// fp32, C F32 or BF16 (gemm_mixed.h's GemmResult). A C with kept_bits takes the product through
// the mask instead (Ops::GemmAddDropped: C += bit ? product * kept_scale : 0, ApplyDropoutMask's
// accumulate bit for bit; beta unread): LoRA's dx += dropout'(du A) in one pass.
void NarrowGemm(ThreadPool& pool, NarrowGemmScratch& scratch, bool trans_a, bool trans_b, int64_t m,
                int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                float beta, const GemmResult& c);

// The same product with gemm_mixed.h's bf16 semantics: A and B F32 or BF16, every element taken
// as bf16 (an F32 one rounded to nearest even), fp32 sums in ascending K. The avx512
// conversion path's products with a side of at most 16 (FastOps): its blocked GEMM's 12 x 32
// tiles would waste half their columns or rows there. A dropped operand (GemmOperand's
// drop_bits: Ops::GemmDropped, LoRA's x A^T and du^T x) is read through its mask as
// ApplyDropoutMask would write it, bit for bit. The streamed operand is converted 8 rows
// at a time into a per-thread buffer, the packed one when packed.
void NarrowGemmBf16(ThreadPool& pool, NarrowGemmScratch& scratch, int64_t m, int64_t n, int64_t k,
                    const GemmOperand& a, const GemmOperand& b, float beta, const GemmResult& c);

}  // namespace air::engine
