// Sums the trainer needs across ranks each step, as functions over a ProcessGroup (the trainer
// calls them once FSDP lands): the global count of loss tokens, so every rank divides its loss
// sum by the same number (HF's average_tokens_across_devices), and the global squared gradient
// norm, so clipping sees the norm of the whole model when each rank holds a shard.
// Thread safety: as ProcessGroup (collective: every rank calls, in the same order).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/parallel/process_group.h"

namespace air::engine::parallel {

// Sum over ranks of each rank's loss tokens (exact: integers).
Result<int64_t> GlobalLossTokens(ProcessGroup& group, int64_t local_loss_tokens);

// Sum over ranks of each rank's squared norm of its gradient shard (in double, summed in rank
// order by Gloo's ring: the same bits on every rank).
Result<double> GlobalSquaredNorm(ProcessGroup& group, double local_squared_norm);

}  // namespace air::engine::parallel
