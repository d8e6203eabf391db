// The fast CPU matrix multiply behind FastOps::Gemm: C = op(A) @ op(B) + beta * C (the
// contract of Ops::Gemm), organized like BLIS/GotoBLAS — for each block of up to 4096 columns
// and each KC-deep slice of K, op(B) is packed into NR-column panels once, by all threads
// together; then the block's MC x NC tiles of C are spread over the thread pool, each thread
// packing its rows of op(A) into MR-row panels, and an MR x NR register-blocked micro-kernel
// (AVX-512, else AVX2+FMA, else a portable loop: cpu_features.h) multiplies them. On AVX2
// kernels op(A) is read in place, unpacked, where its rows are K-contiguous or C has at most
// 16 columns, and a C of at most 16 rows is computed transposed (fast_gemm.cc says why).
// Thread safety: see GemmScratch; one call per scratch at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/cpu/thread_pool.h"

namespace air::engine {

// Packing buffers, reused across calls: the current KC x NC block of op(B) in NR-column panels,
// shared by the threads of one call, and per thread (by the pool's thread index) the MC x KC
// block of op(A) it is working on, in MR-row panels.
struct GemmScratch {
  std::vector<std::vector<float>> packed_a;
  std::vector<float> packed_b;
  std::vector<float> c_transposed;  // C^T of a product of at most 16 rows (AVX2 kernels)
};

void FastGemm(ThreadPool& pool, GemmScratch& scratch, bool trans_a, bool trans_b, int64_t m,
              int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float beta, float* c, int64_t ldc);

// Single-threaded version for callers already inside a parallel region (each with its own
// scratch).
void FastGemmSerial(GemmScratch& scratch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                    int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                    float* c, int64_t ldc);

}  // namespace air::engine
