// Batch checks and host staging (see batch_inputs.h).
#include "engine/model/batch_inputs.h"

#include <string>

namespace air::engine {

namespace {

std::string At(int64_t index, int64_t seq) {
  return "row " + std::to_string(index / seq) + ", column " + std::to_string(index % seq);
}

}  // namespace

Status ValidateTokenBatch(const TokenBatch& batch, int64_t vocab) {
  if (batch.batch_size <= 0 || batch.seq_len <= 0) {
    return InvalidArgument("token batch: batch_size and seq_len must be positive, got " +
                           std::to_string(batch.batch_size) + " x " +
                           std::to_string(batch.seq_len));
  }
  const size_t n = static_cast<size_t>(batch.batch_size) * static_cast<size_t>(batch.seq_len);
  auto check_size = [&](const std::vector<int32_t>& v, const char* field, bool optional) {
    if (v.size() == n || (optional && v.empty())) return Status::Ok();
    return InvalidArgument("token batch: " + std::string(field) + " has " +
                           std::to_string(v.size()) + " values, expected batch_size*seq_len = " +
                           std::to_string(n) + (optional ? " (or none)" : ""));
  };
  AIR_RETURN_IF_ERROR(check_size(batch.input_ids, "input_ids", false));
  AIR_RETURN_IF_ERROR(check_size(batch.labels, "labels", true));
  AIR_RETURN_IF_ERROR(check_size(batch.position_ids, "position_ids", true));
  AIR_RETURN_IF_ERROR(check_size(batch.segment_ids, "segment_ids", true));
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = batch.input_ids[i];
    if (id < 0 || id >= vocab) {
      return InvalidArgument("token batch: input_ids at " + At(i, batch.seq_len) + " is " +
                             std::to_string(id) + ", outside the vocabulary [0, " +
                             std::to_string(vocab) + ")");
    }
    if (!batch.labels.empty()) {
      const int32_t label = batch.labels[i];
      if (label != kIgnoreIndex && (label < 0 || label >= vocab)) {
        return InvalidArgument("token batch: labels at " + At(i, batch.seq_len) + " is " +
                               std::to_string(label) + ": valid labels are -100 or [0, " +
                               std::to_string(vocab) + ")");
      }
    }
    if (!batch.position_ids.empty() && batch.position_ids[i] < 0) {
      return InvalidArgument("token batch: position_ids at " + At(i, batch.seq_len) + " is " +
                             std::to_string(batch.position_ids[i]) + ", must be >= 0");
    }
  }
  return Status::Ok();
}

int64_t StageBatchInputs(const TokenBatch& batch, std::vector<int32_t>& targets,
                         std::vector<int32_t>& positions) {
  const int64_t rows = batch.batch_size, seq = batch.seq_len, n = rows * seq;
  targets.assign(static_cast<size_t>(n), kIgnoreIndex);
  if (!batch.labels.empty()) {
    for (int64_t b = 0; b < rows; ++b) {
      for (int64_t t = 0; t + 1 < seq; ++t) targets[b * seq + t] = batch.labels[b * seq + t + 1];
    }
  }
  if (batch.position_ids.empty()) {
    positions.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(i % seq);
  } else {
    positions.assign(batch.position_ids.begin(), batch.position_ids.end());
  }
  int64_t loss_tokens = 0;
  for (int32_t t : targets) loss_tokens += t != kIgnoreIndex;
  return loss_tokens;
}

}  // namespace air::engine
