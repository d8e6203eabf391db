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
  out.push_back({"reference", {"reference", 1}, BackendTolerances{}});
  // The fast CPU kernels: fp32 sums in a blocked order, vectorized exp. The figures are about
  // 10x what the harness measures on its shapes (the worst case over the three kernel levels).
  BackendTolerances fast;
  fast.gemm_per_sqrt_k = 2e-6f;
  fast.rowwise = 1e-6f;
  fast.rowwise_backward = 1e-5f;
  fast.attention = 2e-6f;
  fast.attention_backward = 1e-5f;
  fast.cross_entropy_grad = 1e-7f;
  fast.reduction_relative = 1e-5;
  fast.elementwise_exact = true;
  out.push_back(
      {std::string("fast/") + CpuKernelsName(SelectedCpuKernels()), {"fast", threads}, fast});
  return out;
}

}  // namespace air::engine
