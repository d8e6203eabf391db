// The micro-kernels of the packed CPU GEMMs (gemm_blocking.h): each multiplies an A panel
// (MR rows) by a B panel (NR columns) over one K slice and adds the MR x NR product into C
// through a TileOut. fp32 panels (fast_gemm.h) hold one value per K step: A as [p][r], B as
// [p][c].
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>

#include "engine/ops/cpu/cpu_features.h"

namespace air::engine {

// Where a micro-kernel's result goes: C (mr x nr valid of MR x NR) with row stride ldc.
// first_slice: C = beta * C + acc (beta == 0: C = acc, ignoring what C held); else C += acc.
struct TileOut {
  float* c;
  int64_t ldc;
  int64_t mr;
  int64_t nr;
  float beta;
  bool first_slice;
};

using Fp32MicroKernelFn = void (*)(int64_t kc, const float* a_panel, const float* b_panel,
                                   const TileOut& out);
// A micro-kernel with its tile: the packing lays panels out as it reads them.
struct Fp32MicroKernel {
  Fp32MicroKernelFn fn;
  int64_t mr;
  int64_t nr;
};

// The fp32 FMA kernel of a level: 8 x 32 with AVX-512 (avx512 and avx512bf16), 6 x 16 with
// AVX2 + FMA, 8 x 32 portable loops.
Fp32MicroKernel Fp32MicroKernelFor(CpuKernels level);

}  // namespace air::engine
