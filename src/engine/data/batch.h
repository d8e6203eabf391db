// TokenBatch: the seam between the data pipeline (engine/data) and the model (engine/model).
//
// Row-major [B, T] arrays. Labels follow the Hugging Face convention: labels[b][t] is the
// token expected at position t, and the model shifts internally (logits at t-1 predict
// labels[t]); -100 means "no loss here" (prompt, padding, the first token of a packed
// document). With packing, several documents share a row: position_ids restart at 0 for each
// document and a token attends only to earlier tokens with the same segment id, so documents
// never see each other. Padding has segment id 0 and label -100. Plain value type.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ops/op_semantics.h"  // kIgnoreIndex

namespace air::engine {

struct TokenBatch {
  int batch_size = 0;                 // B
  int seq_len = 0;                    // T
  std::vector<int32_t> input_ids;     // [B*T]
  std::vector<int32_t> labels;        // [B*T], kIgnoreIndex where no loss is taken
  std::vector<int32_t> position_ids;  // [B*T], 0-based within each document
  std::vector<int32_t> segment_ids;   // [B*T], >= 1 for real tokens, 0 for padding

  // Number of labels != kIgnoreIndex after the shift (positions t >= 1 of each row).
  int64_t CountLossTokens() const {
    int64_t n = 0;
    for (int b = 0; b < batch_size; ++b) {
      for (int t = 1; t < seq_len; ++t) n += labels[b * seq_len + t] != kIgnoreIndex;
    }
    return n;
  }
};

}  // namespace air::engine
