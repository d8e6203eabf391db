// The one registry of backends: which this build has, which this machine can run, how each is
// created for a device, and how close each is to the CPU reference.
//
//   reference  backend/cpu/reference_ops: plain loops, double sums — the ground truth (cpu)
//   fast       backend/cpu/fast_ops: blocked, vectorized, threaded CPU kernels at the level
//              cpu_features.h selects (avx512bf16, avx512, avx2 or generic; AIR_CPU_KERNELS
//              caps it), the bf16 GEMM on the path gemm_path.h chooses (onednn, avx512bf16,
//              ...; AIR_CPU_PATH or BackendOptions::cpu_gemm_path forces one) (cpu). Registered
//              once on the chosen path and once more per other bf16 GEMM path this CPU runs
//              ("fast/avx512bf16/gemm=onednn"), so the harness tests every path; the paths it
//              cannot run are listed as unavailable, with why.
//   cuda       backend/cuda: cuBLASLt GEMMs and CUDA kernels on one GPU (cuda:N), in builds
//              configured with the CUDA toolkit (AIR_CUDA)
//
// Each registered backend declares its tolerances against the fp32 reference, per data dtype
// (F32; BF16: against the fp32 reference on the same bf16-rounded inputs, so the figure includes
// rounding the output once); the op harness (tests/unit/engine_core/ops_harness_test.cc,
// ggml's test-backend-ops) runs every op of every backend this machine can run, in every dtype
// pattern, in the backend's own memory against the reference in its own, and holds it to them.
// A backend this build has but this machine cannot run (cuda without a GPU) is listed with the
// reason, never silently left out. Results are deterministic for a fixed backend, thread count
// and world size (the same call gives the same bits), not identical across backends.
// Thread safety: pure functions (the CUDA probe is done once per process).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"

namespace air::engine {

struct BackendOptions {
  // "fast" (default) or "reference" on the CPU; "cuda" on a GPU. The device says which GPU;
  // ForDevice fills both.
  std::string kind = "fast";
  // Worker threads of the fast CPU path; 0 means AIR_NUM_THREADS if set, else the usable cores.
  int num_threads = 0;
  // cpu, or cuda:N (N among the GPUs CUDA_VISIBLE_DEVICES shows this process).
  Device device;
  // The fast CPU backend's bf16 GEMM path (gemm_path.h: "onednn", "avx512bf16", ...); empty:
  // AIR_CPU_PATH if set, else the rule.
  std::string cpu_gemm_path;
};

// The default backend of a device: fast for cpu, cuda for cuda:N.
BackendOptions ForDevice(Device device, int num_threads = 0);

// Parses "cpu", "cuda" (cuda:0) or "cuda:N"; InvalidArgument naming the valid forms otherwise.
Result<Device> ParseDevice(const std::string& text);

// How far a backend's results may be from the fp32 reference's, as max |a - b| / (1 + max |ref|)
// per op family (0: the same bits). Each figure is at most 10x the worst the harness measures,
// and 0 where it measures 0.
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
  std::string name;  // "reference", "fast/avx512", "fast/avx512bf16/gemm=onednn", "cuda:0"
  BackendOptions options;
  BackendTolerances f32;           // F32 data
  BackendTolerances bf16;          // every data argument BF16
  BackendTolerances bf16_f32grad;  // BF16 activations and weights, F32 gradients (the model's)
};

// A backend this build has that this machine cannot run, and why.
struct UnavailableBackend {
  std::string name;  // "cuda", "fast/gemm=onednn"
  std::string why;   // "no CUDA device: cudaGetDeviceCount: ..."
};

bool IsKnownBackendKind(const std::string& kind);
// "cuda, fast, reference" (what this build has): for error messages.
std::string KnownBackendKinds();
// Whether this build has the CUDA backend (configured with AIR_CUDA).
bool BuiltWithCuda();

// The GPUs this process can use (CUDA_VISIBLE_DEVICES applied). FailedPrecondition naming why
// there are none (a build without the CUDA backend, no driver, no device) and the CPU path.
Result<int> VisibleGpuCount();

// Creates the backend `options` names on its device. Errors name what is missing and the way
// out: an unknown kind (InvalidArgument, the valid kinds), a CPU GEMM path that is unknown or
// that this CPU cannot run (naming the paths it can), a kind that does not run on the
// device, cuda in a build without it or on a machine without a usable GPU or driver
// (FailedPrecondition, naming the CPU path), a GPU index beyond the visible ones.
Result<std::shared_ptr<Backend>> CreateBackend(const BackendOptions& options = {});

// Every backend this build can run on this machine, with its tolerances (the reference first;
// cuda:0 when a GPU is visible). `threads` is the thread count of the threaded ones.
std::vector<RegisteredBackend> RegisteredBackends(int threads);
// The backends this build has that this machine cannot run (for the harness to print).
std::vector<UnavailableBackend> UnavailableBackends();

}  // namespace air::engine
