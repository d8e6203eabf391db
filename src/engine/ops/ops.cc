// CreateCpuOps: picks the CPU implementation by name (see ops.h).
#include "engine/ops/ops.h"

#include "engine/ops/cpu/fast_ops.h"
#include "engine/ops/cpu/reference_ops.h"

namespace air::engine {

bool IsKnownOpsKind(const std::string& kind) { return kind == "fast" || kind == "reference"; }

std::unique_ptr<Ops> CreateCpuOps(const OpsOptions& options) {
  if (options.kind == "reference") return std::make_unique<ReferenceOps>();
  if (options.kind == "fast") return std::make_unique<FastOps>(options.num_threads);
  return nullptr;
}

}  // namespace air::engine
