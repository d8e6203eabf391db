// Backend names, factories and tolerances (see registry.h).
#include "engine/backend/registry.h"

#include "engine/ops/cpu/cpu_features.h"
#include "engine/ops/cpu/fast_ops.h"
#include "engine/ops/cpu/reference_ops.h"

namespace air::engine {

bool IsKnownBackendKind(const std::string& kind) { return kind == "fast" || kind == "reference"; }

std::string KnownBackendKinds() { return "fast, reference"; }

Result<std::shared_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  if (options.kind == "reference") return std::shared_ptr<Backend>(new ReferenceOps());
  if (options.kind == "fast") return std::shared_ptr<Backend>(new FastOps(options.num_threads));
  return InvalidArgument("unknown backend '" + options.kind + "': valid backends are " +
                         KnownBackendKinds());
}

std::vector<RegisteredBackend> RegisteredBackends(int threads) {
  std::vector<RegisteredBackend> out;
  // The reference in BF16 differs from the fp32 reference only by rounding each output once
  // (and by GEMMs rounding an F32 operand to bf16).
  BackendTolerances reference_bf16;
  reference_bf16.gemm_per_sqrt_k = 2e-3;
  reference_bf16.rowwise = 2e-2;
  reference_bf16.rowwise_backward = 2e-2;
  reference_bf16.attention = 2e-2;
  reference_bf16.attention_backward = 2e-2;
  reference_bf16.cross_entropy_grad = 2e-2;
  reference_bf16.elementwise = 2e-2;
  reference_bf16.reduction_relative = 1e-5;
  out.push_back({"reference", {"reference", 1}, BackendTolerances{}, reference_bf16});
  // The fast CPU kernels: fp32 sums in a blocked order, vectorized exp. The figures are about
  // 10x what the harness measures on its shapes (the worst case over the three kernel levels).
  BackendTolerances fast;
  fast.gemm_per_sqrt_k = 2e-6;
  fast.rowwise = 1e-6;
  fast.rowwise_backward = 1e-5;
  fast.attention = 2e-6;
  fast.attention_backward = 1e-5;
  fast.cross_entropy_grad = 1e-7;
  fast.elementwise = 1e-6;
  fast.reduction_relative = 1e-5;
  fast.optimizer_exact = true;
  BackendTolerances fast_bf16 = reference_bf16;
  out.push_back({std::string("fast/") + CpuKernelsName(SelectedCpuKernels()),
                 {"fast", threads},
                 fast,
                 fast_bf16});
  return out;
}

}  // namespace air::engine
