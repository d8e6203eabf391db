// The fast CPU matrix multiply behind FastOps::Gemm: C = op(A) @ op(B) + beta * C (the
// contract of Ops::Gemm), organized like BLIS/GotoBLAS — K split into KC-deep slices, C into
// MC x NC tiles spread over the thread pool; each tile packs its slice of A into MR-row panels
// and of B into NR-column panels, and an MR x NR register-blocked micro-kernel (AVX-512 when the
// CPU has it, chosen at run time; a portable loop otherwise) multiplies them.
// Thread safety: see GemmScratch; one call per scratch at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ops/cpu/thread_pool.h"

namespace air::engine {

// Per-thread packing buffers, reused across calls (indexed by the pool's thread index).
struct GemmScratch {
  std::vector<std::vector<float>> per_thread;
};

void FastGemm(ThreadPool& pool, GemmScratch& scratch, bool trans_a, bool trans_b, int64_t m,
              int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float beta, float* c, int64_t ldc);

// Single-threaded version for callers already inside a parallel region; `buffer` is resized
// as needed.
void FastGemmSerial(std::vector<float>& buffer, bool trans_a, bool trans_b, int64_t m, int64_t n,
                    int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                    float* c, int64_t ldc);

// True when the AVX-512 micro-kernel is in use on this CPU.
bool FastGemmUsesAvx512();

}  // namespace air::engine
