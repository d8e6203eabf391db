// DataLoader: tokenized examples -> TokenBatch micro-batches for one data-parallel rank.
//
// Rows. With packing (the default) examples are laid end to end into rows of seq_len tokens:
// in a shuffled order (seed), each example goes into the current row if it fits, else it starts
// a new one; an example is never split. Rows are packed once, so every epoch has the same
// number of rows. Without packing each example is its own row, and rows are grouped by length
// (group_by_length) so a batch pads little: per epoch the shuffled examples are cut into chunks
// of 16 steps, each chunk is sorted by length, cut into steps, and the order of the steps is
// shuffled. A padded micro-batch is as long as its longest row over every rank (rounded up to
// pad_to_multiple_of, at most seq_len) — the same on every rank.
//
// Steps, batches and ranks. An optimizer step reads S = B*W*A rows of the epoch order (B =
// batch_size, W = world_size, A = micro_batches_per_step, the gradient accumulation): step j
// holds rows [j*S, (j+1)*S), cut into A global micro-batches of B*W rows, and rank r gets
// [r*B, (r+1)*B) of each — disjoint across ranks, the same number of batches everywhere. Which
// rows a step holds depends on S only, not on how S is split into B, W and A: a run resumed on
// another number of ranks with the same global batch reads the same rows in the same steps. An
// epoch is ceil(rows / S) steps; nothing is dropped: the last step of an epoch may run past the
// end of the data (as transformers' Trainer ends a step with its epoch), and a micro-batch then
// holds only its rows of data (fewer than batch_size); a rank left with none gets one row of
// padding (segment 0, label -100).
//
// Rows (see batch.h): position_ids restart at 0 for each document, segment_ids number the
// documents of a row from 1 (0 = padding), input_ids padding is pad_id, and the label of each
// document's first token is -100 so nothing is predicted across a document boundary.
//
// Epochs. Next() never runs dry: after the last batch of an epoch the next epoch begins,
// reshuffled. total_batches() is where training should stop: max_batches when > 0, else
// ceil(num_epochs * batches_per_epoch()). Seek() jumps to any batch index (to resume).
// Thread safety: one consumer; not safe to share between threads without a lock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/data/batch.h"
#include "engine/data/examples.h"

namespace air::engine {

struct DataLoaderOptions {
  int batch_size = 1;  // rows per micro-batch on this rank (per_device_batch_size)
  int seq_len = 2048;  // row length when packing; the longest row otherwise
  bool packing = true;
  bool group_by_length = true;  // padded rows only
  int pad_to_multiple_of = 8;   // padded rows only
  bool shuffle = true;
  uint64_t seed = 42;
  int rank = 0;
  int world_size = 1;
  int micro_batches_per_step = 1;  // gradient_accumulation_steps
  double num_epochs = 1.0;
  int64_t max_batches = 0;  // > 0: total_batches() (e.g. max_steps * gradient accumulation)
};

struct BatchInfo {
  int64_t index = 0;  // batch number since the start (0-based)
  int64_t epoch = 0;
  int64_t real_tokens = 0;  // non-padding tokens
  int64_t loss_tokens = 0;  // TokenBatch::CountLossTokens()
  int64_t documents = 0;
};

struct PackingStats {
  int64_t examples = 0;
  int64_t rows = 0;       // per epoch, before filling the last global batch
  int64_t truncated = 0;  // examples cut to seq_len
  double fill = 0.0;      // real tokens / (rows * seq_len) for packing
};

class DataLoader {
 public:
  // Checks the options (each error names the option and what is valid) and plans the rows.
  static Result<DataLoader> Create(std::vector<TokenizedExample> examples, int32_t pad_id,
                                   const DataLoaderOptions& options);

  // Micro-batches per epoch: steps_per_epoch() * micro_batches_per_step.
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t steps_per_epoch() const { return batches_per_epoch_ / options_.micro_batches_per_step; }
  // The micro-batches of an epoch as transformers' DataLoader counts them (its len): ceil(rows /
  // (B*W)), for a step count that agrees with its Trainer's.
  int64_t transformers_batches_per_epoch() const;
  int64_t total_batches() const { return total_batches_; }
  // Batches handed out (or skipped by Seek) so far: the index of the next batch.
  int64_t position() const { return position_; }
  bool done() const { return position_ >= total_batches_; }
  // Epochs completed plus the fraction of the current one.
  double epoch_progress() const;
  const PackingStats& stats() const { return stats_; }
  // The largest micro-batch this loader hands out: at most batch_size rows (fewer when the data
  // has fewer rows), each at most as long as the longest row (seq_len when packing; padded rows:
  // the longest example rounded up to pad_to_multiple_of). What the memory plan sizes.
  int64_t max_batch_rows() const { return std::min<int64_t>(options_.batch_size, rows_per_epoch_); }
  int max_row_tokens() const { return max_row_tokens_; }

  // The next micro-batch of this rank.
  TokenBatch Next(BatchInfo* info = nullptr);
  // Makes `index` the next batch.
  Status Seek(int64_t index);

  // The examples of this rank's rows in batch `index` (for tests and inspection): per row, the
  // indices of the examples it holds.
  std::vector<std::vector<int64_t>> RowsOfBatch(int64_t index);

 private:
  DataLoader() = default;
  void PlanEpoch(int64_t epoch);  // fills epoch_rows_ / epoch_lengths_ for `epoch`
  int RowLength(const std::vector<int64_t>& row) const;

  DataLoaderOptions options_;
  int32_t pad_id_ = 0;
  std::vector<TokenizedExample> examples_;
  std::vector<std::vector<int64_t>> packed_rows_;  // packing: the fixed rows
  PackingStats stats_;
  int64_t rows_per_epoch_ = 0;
  int max_row_tokens_ = 0;
  int64_t batches_per_epoch_ = 0;
  int64_t total_batches_ = 0;
  int64_t position_ = 0;
  int64_t planned_epoch_ = -1;
  // The epoch's global order: row r of the epoch holds these example indices (empty: padding).
  std::vector<std::vector<int64_t>> epoch_rows_;
  std::vector<int> global_batch_len_;  // padded mode: T of each global micro-batch of the epoch
};

}  // namespace air::engine
