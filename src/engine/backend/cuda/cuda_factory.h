// The CUDA backend as the registry (backend/registry.cc) sees it: how many GPUs this process can
// use, and a backend for one of them. Declared without
// CUDA's headers, so the registry compiles the same way with or without AIR_CUDA; defined in
// cuda_backend.cc, which only AIR_CUDA builds compile.
// Thread safety: CudaDeviceCount probes once per process (thread-safe); creating backends is
// thread-safe.
#pragma once

#include <memory>

#include "base/status.h"
#include "engine/backend/backend.h"

namespace air::engine::cuda {

// The GPUs CUDA shows this process (CUDA_VISIBLE_DEVICES applied). FailedPrecondition naming
// CUDA's reason where none can be used: no driver, a driver older than this build's CUDA, no
// device, a device the driver cannot open.
Result<int> CudaDeviceCount();

// A backend on GPU `index` (its own stream, cuBLASLt handle and memory pool). InvalidArgument
// when the index is not among the visible GPUs.
Result<std::shared_ptr<Backend>> CreateCudaBackend(int index);

}  // namespace air::engine::cuda
