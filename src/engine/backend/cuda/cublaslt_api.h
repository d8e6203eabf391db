// The cuBLASLt functions the GEMM calls (cuda_gemm.cc), resolved from libcublasLt.so.13 with
// dlopen the first time a CUDA backend is created, not linked: the library is 540 MB with some
// 400,000 relocations, and linking it made every `air` process (the CLI, each node's agent, the
// server) map and relocate it at start — 0.26 s and 220 MB for `air version`, on machines that
// will never touch a GPU. Declared with cuBLASLt's own types (cublasLt.h, from the toolkit), so
// the calls are checked against the real signatures at compile time.
// Thread safety: LoadCublasLt resolves once per process (thread-safe); the table is then const.
#pragma once

#include <cublasLt.h>

#include "base/status.h"

namespace air::engine::cuda {

struct CublasLtApi {
  decltype(&cublasLtCreate) Create = nullptr;
  decltype(&cublasLtDestroy) Destroy = nullptr;
  decltype(&cublasLtGetStatusString) GetStatusString = nullptr;
  decltype(&cublasLtMatmul) Matmul = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic = nullptr;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate = nullptr;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy = nullptr;
};

// The functions of libcublasLt.so.13 (found the way the dynamic loader finds any library:
// LD_LIBRARY_PATH, the cache, RPATH). FailedPrecondition naming the library, the loader's error
// and the way out when it cannot be loaded or lacks a function.
Result<const CublasLtApi*> LoadCublasLt();

}  // namespace air::engine::cuda
