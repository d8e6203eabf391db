// The backends air can run on, by name, and how close each is to the CPU reference.
//
//   reference  ops/cpu/reference_ops: plain loops, double sums — the ground truth
//   fast       ops/cpu/fast_ops: blocked, vectorized, threaded CPU kernels at the level
//              cpu_features.h selects (avx512bf16, avx512, avx2 or generic; AIR_CPU_KERNELS
//              caps it)
//
// A CUDA backend registers here next. Each registered backend declares its tolerances against
// the fp32 reference, per data dtype (F32; BF16: against the fp32 reference on the same
// bf16-rounded inputs, so the figure includes rounding the output once); the op harness
// (tests/unit/engine_core/ops_harness_test.cc, ggml's test-backend-ops) runs every op of every
// registered backend in every dtype it supports through the backend's own memory and holds it to
// them. Results are deterministic for a fixed backend, thread count and world
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

// How far a backend's results may be from the fp32 reference's, as max |a - b| / (1 + max |ref|)
// per op family (0: the same bits). Each figure is at most 10x the worst the harness measures
// over the kernel levels (avx512bf16, avx512, avx2, generic), and 0 where it measures 0.
struct BackendTolerances {
  double gemm_per_sqrt_k = 0.0;     // GEMM, divided by sqrt(K)
  double rowwise = 0.0;             // RMSNorm forward, SwiGLU, log-sum-exp
  double rowwise_backward = 0.0;    // RMSNorm backward, SwiGLU backward
  double attention = 0.0;           // attention forward (output and lse)
  double attention_backward = 0.0;  // dq, dk, dv
  double cross_entropy_grad = 0.0;  // dlogits
  double elementwise = 0.0;         // embedding, RoPE, adds, bias, conversions
  double reduction_relative = 0.0;  // loss sums, sums of squares, bias sums (relative)
  bool optimizer_exact = true;      // AdamW and Scale: the reference's bits
};

struct RegisteredBackend {
  std::string name;  // "reference", "fast/avx512", ...
  BackendOptions options;
  BackendTolerances f32;           // F32 data
  BackendTolerances bf16;          // every data argument BF16
  BackendTolerances bf16_f32grad;  // BF16 activations and weights, F32 gradients (the model's)
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
