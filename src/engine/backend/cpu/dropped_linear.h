// Ops::DroppedLinearBackward on the avx512bf16 path: the backward of LoRA's A (u = drop(x) A^T,
// rank r <= 16) in one pass over x, its kept mask and dx, per 32 columns of x:
//   w_grad (r, in) = dy^T drop(x) + beta * w_grad   and   dx (n, in) += drop'(dy W)
// Hand-written because the two GEMMs it replaces (GemmDropped with M = r, GemmAddDropped with
// K = r) are bound by their passes over memory, not their arithmetic: the first packs all of
// drop(x) into pair panels to multiply 16 rows by it, the second reads and writes dx through the
// mask again; here each row block of 32 columns of x is dropped and paired along N into an L1
// buffer and multiplied in 8 x 32 tiles, and the block's rows of dx get their kept add while
// its mask bits are still in cache. Warm, 2 threads: 158 us against 196 for the two ops at
// 1024 x 512; in bench/lora's step (x cold from the forward, its strided rows prefetched)
// 0.098 s against 0.110-0.118 s over 14 steps (docs/performance.md, "LoRA's step", fifth round).
//
// Bits: those of the definition on the same path (GemmDropped, then GemmAddDropped): every
// element gets its vdpbf16ps sums in the GEMM's order (pairs along K ascending in one fp32
// accumulator; the weight gradient in the GEMM's equal K slices of at most
// kGemmBf16PairSlice rows, each added into w_grad), dy is rounded to bf16 as the GEMM packs it,
// the dropped x and the kept add are ApplyDropoutMask's operations (bf16_simd.h).
// Thread safety: one call per scratch at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/backend/cpu/thread_pool.h"

namespace air::engine {

inline constexpr int64_t kDroppedLinearMaxRank = 16;

struct DroppedLinearGrads {
  int64_t n, r, in;
  const uint16_t* x;    // (n, in) bf16
  const uint8_t* bits;  // bit e: x's and dx's flat element e kept
  int64_t bytes;        // of bits
  float scale;          // 1 / (1 - p)
  const uint16_t* w;    // (r, in) bf16 (read only with dx)
  const void* dy;       // (n, r): float or bf16 bits
  bool dy_bf16;
  float beta;     // 0 or 1
  float* w_grad;  // (r, in)
  void* dx;       // (n, in): float or bf16 bits; null: no input gradient
  bool dx_bf16;
};

// Whether the fused kernel takes a call: the avx512bf16 path, x BF16 (and W BF16 with dx),
// an F32 w_grad, 1 <= r <= 16, n and in positive.
bool DroppedLinearBackwardRuns(GemmBf16Path path, int64_t n, int64_t r, int64_t in, bool x_bf16,
                               bool w_bf16, bool w_grad_f32, bool has_dx);

// dy's pairs in both layouts, grown on demand.
struct DroppedLinearScratch {
  std::vector<uint32_t> dy_pairs;
};

void FusedDroppedLinearBackward(ThreadPool& pool, DroppedLinearScratch& scratch,
                                const DroppedLinearGrads& g);

}  // namespace air::engine
