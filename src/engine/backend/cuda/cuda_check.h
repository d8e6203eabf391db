// AIR_CUDA_CHECK and AIR_CUBLAS_CHECK: abort naming the call, the file and line and CUDA's (or
// cuBLAS's) own error text when a runtime call that cannot fail in a correct program fails (a
// kernel launch with a bad configuration, a copy between invalid pointers, a sticky device
// error after an illegal access). Errors a user can cause (no GPU, no driver, out of memory)
// are checked where they can happen and returned as Status values instead (cuda_backend.cc).
// AIR_CUDA_CHECK_LAUNCH() checks the last launch (cudaGetLastError) without synchronizing.
// Thread safety: stateless.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define AIR_CUDA_CHECK(call)                                                                    \
  do {                                                                                          \
    const cudaError_t air_cuda_error = (call);                                                  \
    if (air_cuda_error != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d: CUDA call failed: %s: %s (%s)\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(air_cuda_error), cudaGetErrorName(air_cuda_error));       \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)

#define AIR_CUDA_CHECK_LAUNCH() AIR_CUDA_CHECK(cudaGetLastError())
