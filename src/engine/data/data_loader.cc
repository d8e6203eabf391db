// Packing, length grouping, sharding and epochs (see data_loader.h).
#include "engine/data/data_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/data/rng.h"

namespace air::engine {
namespace {

// Random streams (see rng.h): one for packing, one per epoch for the order of rows, one per
// epoch for the order of length-grouped batches.
constexpr uint64_t kPackStream = 0x7061636BULL;  // "pack"
constexpr uint64_t kEpochStreamBase = 1000;
constexpr uint64_t kBatchOrderStreamBase = 1ULL << 32;
constexpr int64_t kGroupChunkSteps = 16;

std::vector<int64_t> Order(int64_t n, bool shuffle, uint64_t seed, uint64_t stream) {
  if (shuffle) return Permutation(n, seed, stream);
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  return p;
}

}  // namespace

Result<DataLoader> DataLoader::Create(std::vector<TokenizedExample> examples, int32_t pad_id,
                                      const DataLoaderOptions& o) {
  if (o.batch_size < 1) {
    return InvalidArgument(
        fmt::format("per_device_batch_size: {} is invalid; it must be at least 1", o.batch_size));
  }
  if (o.seq_len < 2) {
    return InvalidArgument(
        fmt::format("max_seq_len: {} is invalid; it must be at least 2", o.seq_len));
  }
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return InvalidArgument(fmt::format(
        "rank {} of world_size {}: the rank must lie in [0, world_size) and world_size be >= 1",
        o.rank, o.world_size));
  }
  if (o.micro_batches_per_step < 1) {
    return InvalidArgument(
        fmt::format("gradient_accumulation_steps: {} is invalid; it must be at least 1",
                    o.micro_batches_per_step));
  }
  if (o.max_batches < 0) {
    return InvalidArgument(
        fmt::format("max_steps: {} is invalid; use a positive number, or 0 "
                    "(or leave it out) to let num_train_epochs decide",
                    o.max_batches));
  }
  if (o.max_batches == 0 && !(o.num_epochs > 0)) {
    return InvalidArgument(fmt::format(
        "num_train_epochs: {} is invalid; it must be > 0 when max_steps is not set", o.num_epochs));
  }
  if (o.pad_to_multiple_of < 1) {
    return InvalidArgument("pad_to_multiple_of: must be at least 1");
  }
  if (examples.empty()) return InvalidArgument("empty dataset: there are no examples to batch");

  DataLoader loader;
  loader.options_ = o;
  loader.pad_id_ = pad_id;
  loader.examples_ = std::move(examples);
  loader.stats_.examples = static_cast<int64_t>(loader.examples_.size());
  int64_t real_tokens = 0;
  for (auto& ex : loader.examples_) {
    if (ex.input_ids.size() > static_cast<size_t>(o.seq_len)) {
      ex.input_ids.resize(o.seq_len);
      ex.labels.resize(o.seq_len);
      ++loader.stats_.truncated;
    }
    real_tokens += static_cast<int64_t>(ex.input_ids.size());
  }
  auto n = static_cast<int64_t>(loader.examples_.size());
  if (o.packing) {
    std::vector<int64_t> row;
    int used = 0;
    for (int64_t i : Order(n, o.shuffle, o.seed, kPackStream)) {
      int len = static_cast<int>(loader.examples_[i].input_ids.size());
      if (!row.empty() && used + len > o.seq_len) {
        loader.packed_rows_.push_back(std::move(row));
        row.clear();
        used = 0;
      }
      row.push_back(i);
      used += len;
    }
    if (!row.empty()) loader.packed_rows_.push_back(std::move(row));
    loader.rows_per_epoch_ = static_cast<int64_t>(loader.packed_rows_.size());
    loader.stats_.fill = static_cast<double>(real_tokens) /
                         (static_cast<double>(loader.rows_per_epoch_) * o.seq_len);
  } else {
    loader.rows_per_epoch_ = n;
  }
  loader.stats_.rows = loader.rows_per_epoch_;
  if (o.packing) {
    loader.max_row_tokens_ = o.seq_len;
  } else {
    int longest = 1;
    for (const auto& ex : loader.examples_) {
      longest = std::max(longest, static_cast<int>(ex.input_ids.size()));
    }
    const int m = o.pad_to_multiple_of;
    loader.max_row_tokens_ = std::min(o.seq_len, (longest + m - 1) / m * m);
  }
  const int64_t step_rows =
      static_cast<int64_t>(o.batch_size) * o.world_size * o.micro_batches_per_step;
  loader.batches_per_epoch_ =
      (loader.rows_per_epoch_ + step_rows - 1) / step_rows * o.micro_batches_per_step;
  if (o.max_batches > 0) {
    loader.total_batches_ = o.max_batches;
  } else {
    double total = o.num_epochs * static_cast<double>(loader.batches_per_epoch_);
    loader.total_batches_ = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(total - 1e-9)));
  }
  return loader;
}

int DataLoader::RowLength(const std::vector<int64_t>& row) const {
  int len = 0;
  for (int64_t i : row) len += static_cast<int>(examples_[i].input_ids.size());
  return len;
}

void DataLoader::PlanEpoch(int64_t epoch) {
  if (planned_epoch_ == epoch) return;
  planned_epoch_ = epoch;
  const auto& o = options_;
  int64_t global = static_cast<int64_t>(o.batch_size) * o.world_size;
  int64_t slots = batches_per_epoch_ * global;
  epoch_rows_.clear();
  epoch_rows_.reserve(static_cast<size_t>(slots));
  global_batch_len_.clear();
  std::vector<int64_t> order =
      Order(rows_per_epoch_, o.shuffle, o.seed, kEpochStreamBase + static_cast<uint64_t>(epoch));
  if (o.packing) {
    for (int64_t r : order) epoch_rows_.push_back(packed_rows_[r]);
    epoch_rows_.resize(static_cast<size_t>(slots));
    return;
  }
  auto length = [&](int64_t i) { return examples_[i].input_ids.size(); };
  const int64_t micro = o.micro_batches_per_step;
  const int64_t step_rows = global * micro;
  const int64_t steps = batches_per_epoch_ / micro;
  if (o.group_by_length) {
    int64_t chunk = step_rows * kGroupChunkSteps;
    for (int64_t start = 0; start < rows_per_epoch_; start += chunk) {
      auto first = order.begin() + start;
      auto last = order.begin() + std::min(rows_per_epoch_, start + chunk);
      std::stable_sort(first, last, [&](int64_t a, int64_t b) { return length(a) > length(b); });
    }
  }
  std::vector<int64_t> step_order =
      o.group_by_length && o.shuffle
          ? Permutation(steps, o.seed, kBatchOrderStreamBase + static_cast<uint64_t>(epoch))
          : Order(steps, false, 0, 0);
  // Step j's rows, in the order of the steps; each global micro-batch padded to its longest row.
  for (int64_t j : step_order) {
    for (int64_t m = 0; m < micro; ++m) {
      int longest = 1;
      for (int64_t i = 0; i < global; ++i) {
        const int64_t pos = j * step_rows + m * global + i;
        std::vector<int64_t> row;
        if (pos < rows_per_epoch_) row.push_back(order[pos]);
        longest = std::max(longest, RowLength(row));
        epoch_rows_.push_back(std::move(row));
      }
      const int pad = o.pad_to_multiple_of;
      global_batch_len_.push_back(std::min(o.seq_len, (longest + pad - 1) / pad * pad));
    }
  }
}

std::vector<std::vector<int64_t>> DataLoader::RowsOfBatch(int64_t index) {
  PlanEpoch(index / batches_per_epoch_);
  int64_t k = index % batches_per_epoch_;
  int64_t base = k * options_.batch_size * options_.world_size +
                 static_cast<int64_t>(options_.rank) * options_.batch_size;
  std::vector<std::vector<int64_t>> rows;
  for (int b = 0; b < options_.batch_size; ++b) rows.push_back(epoch_rows_[base + b]);
  return rows;
}

TokenBatch DataLoader::Next(BatchInfo* info) {
  int64_t index = position_++;
  int64_t epoch = index / batches_per_epoch_;
  std::vector<std::vector<int64_t>> rows = RowsOfBatch(index);
  // Rows past the end of the data come last; leave them out (but keep one row) so a batch
  // larger than the data does not compute — and allocate — rows of nothing but padding.
  while (rows.size() > 1 && rows.back().empty()) rows.pop_back();
  const int B = static_cast<int>(rows.size());
  const int T = options_.packing ? options_.seq_len : global_batch_len_[index % batches_per_epoch_];
  TokenBatch batch;
  batch.batch_size = B;
  batch.seq_len = T;
  batch.input_ids.assign(static_cast<size_t>(B) * T, pad_id_);
  batch.labels.assign(static_cast<size_t>(B) * T, kIgnoreIndex);
  batch.position_ids.assign(static_cast<size_t>(B) * T, 0);
  batch.segment_ids.assign(static_cast<size_t>(B) * T, 0);
  int64_t real = 0, documents = 0;
  for (int b = 0; b < B; ++b) {
    size_t t = static_cast<size_t>(b) * T;
    int segment = 0;
    for (int64_t i : rows[b]) {
      const TokenizedExample& ex = examples_[i];
      ++segment;
      ++documents;
      for (size_t j = 0; j < ex.input_ids.size(); ++j, ++t) {
        batch.input_ids[t] = ex.input_ids[j];
        // The first token of a document is never a target: nothing may predict it across the
        // boundary with the previous document.
        batch.labels[t] = j == 0 ? kIgnoreIndex : ex.labels[j];
        batch.position_ids[t] = static_cast<int32_t>(j);
        batch.segment_ids[t] = segment;
      }
      real += static_cast<int64_t>(ex.input_ids.size());
    }
  }
  if (info != nullptr) {
    info->index = index;
    info->epoch = epoch;
    info->real_tokens = real;
    info->loss_tokens = batch.CountLossTokens();
    info->documents = documents;
  }
  return batch;
}

Status DataLoader::Seek(int64_t index) {
  if (index < 0) return InvalidArgument(fmt::format("cannot seek to batch {}", index));
  position_ = index;
  return Status::Ok();
}

int64_t DataLoader::transformers_batches_per_epoch() const {
  const int64_t global = static_cast<int64_t>(options_.batch_size) * options_.world_size;
  return (rows_per_epoch_ + global - 1) / global;
}

double DataLoader::epoch_progress() const {
  return static_cast<double>(position_) / static_cast<double>(batches_per_epoch_);
}

}  // namespace air::engine
