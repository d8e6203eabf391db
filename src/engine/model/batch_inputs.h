// The host side of a training batch, shared by the models' Forward: the checks a TokenBatch
// must pass before anything indexes with it, and the host staging of its inputs (the shifted
// targets — logits at t predict labels[t + 1] — and the positions) that is then uploaded.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/data/batch.h"

namespace air::engine {

// Sizes and value ranges: input ids in [0, vocab), labels -100 or in [0, vocab), positions
// >= 0; InvalidArgument naming the field, row, column and value otherwise.
Status ValidateTokenBatch(const TokenBatch& batch, int64_t vocab);

// targets[b, t] = labels[b, t + 1] (-100 at the last column and without labels); positions =
// the batch's position_ids, or 0..T-1 per row. Returns the number of targets != -100.
int64_t StageBatchInputs(const TokenBatch& batch, std::vector<int32_t>& targets,
                         std::vector<int32_t>& positions);

}  // namespace air::engine
