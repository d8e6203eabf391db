// GlobalLossTokens and GlobalSquaredNorm: one-element all-reduces.
#include "engine/parallel/global_sums.h"

namespace air::engine::parallel {

Result<int64_t> GlobalLossTokens(ProcessGroup& group, int64_t local_loss_tokens) {
  int64_t total = local_loss_tokens;
  AIR_RETURN_IF_ERROR(group.AllReduce(&total, 1, CommDType::kI64, ReduceOp::kSum));
  return total;
}

Result<double> GlobalSquaredNorm(ProcessGroup& group, double local_squared_norm) {
  double total = local_squared_norm;
  AIR_RETURN_IF_ERROR(group.AllReduce(&total, 1, CommDType::kF64, ReduceOp::kSum));
  return total;
}

}  // namespace air::engine::parallel
