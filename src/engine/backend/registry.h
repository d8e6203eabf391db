// The backends air can run on, by name, and how close each is to the CPU reference.
//
//   reference  ops/cpu/reference_ops: plain loops, double sums — the ground truth
//   fast       ops/cpu/fast_ops: blocked, vectorized, threaded CPU kernels at the level
//              cpu_features.h selects (avx512bf16, avx512, avx2 or generic; AIR_CPU_KERNELS
//              caps it)
//
// A CUDA backend registers here next. Each registered backend declares its tolerances against
// the reference; the op harness (tests/unit/engine_core/ops_harness_test.cc, ggml's
// test-backend-ops) runs every op of every registered backend through the backend's own memory
// and holds it to them. Results are deterministic for a fixed backend, thread count and world
// size (the same call gives the same bits), not identical across backends.
// Thread safety: pure functions.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"

namespace air::engine {

struct BackendOptions {
  // "fast" (default) or "reference".
  std::string kind = "fast";
  // Worker threads of the fast CPU path; 0 means AIR_NUM_THREADS if set, else the usable cores.
  int num_threads = 0;
};

// How far a backend's results may be from the reference's, as max |a - b| / (1 + max |ref|)
// per op family (0: the same bits).
struct BackendTolerances {
  float gemm_per_sqrt_k = 0.0f;     // GEMM, divided by sqrt(K)
  float rowwise = 0.0f;             // RMSNorm forward, SwiGLU, log-sum-exp
  float rowwise_backward = 0.0f;    // RMSNorm backward
  float attention = 0.0f;           // attention forward (output and lse)
  float attention_backward = 0.0f;  // dq, dk, dv
  float cross_entropy_grad = 0.0f;  // dlogits
  double reduction_relative = 0.0;  // loss sums, sums of squares (relative)
  bool elementwise_exact = true;    // AdamW, Scale, AddInPlace, bias: the reference's bits
};

struct RegisteredBackend {
  std::string name;  // "reference", "fast/avx512", ...
  BackendOptions options;
  BackendTolerances tolerances;
};

bool IsKnownBackendKind(const std::string& kind);
// "fast, reference": for error messages.
std::string KnownBackendKinds();

// Builds the backend options name; InvalidArgument naming the valid kinds for anything else.
Result<std::shared_ptr<Backend>> CreateBackend(const BackendOptions& options = {});

// Every backend this build can run, with its tolerances (the reference first). `threads` is
// the thread count of the threaded ones.
std::vector<RegisteredBackend> RegisteredBackends(int threads);

}  // namespace air::engine
