// DataLoader tests: packing boundaries, segment and position ids, padding, truncation, the
// SplitMix64 recipe, shuffle determinism, epochs and max_batches, sharding across ranks, Seek,
// length grouping, and option errors.
#include "engine/data/data_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "engine/data/rng.h"

namespace air::engine {
namespace {

using ::testing::HasSubstr;
constexpr int32_t kPad = 7;

// Example i has `lengths[i]` tokens with ids 1000*(i+1) + j, all learned.
std::vector<TokenizedExample> Examples(const std::vector<int>& lengths) {
  std::vector<TokenizedExample> out;
  for (size_t i = 0; i < lengths.size(); ++i) {
    TokenizedExample ex;
    for (int j = 0; j < lengths[i]; ++j) ex.input_ids.push_back(1000 * (int32_t(i) + 1) + j);
    ex.labels = ex.input_ids;
    out.push_back(std::move(ex));
  }
  return out;
}

DataLoader Make(const std::vector<int>& lengths, DataLoaderOptions o) {
  auto loader = DataLoader::Create(Examples(lengths), kPad, o);
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  return std::move(loader).value();
}

TEST(DataLoaderTest, PacksWholeExamplesWithSegmentsAndRestartingPositions) {
  DataLoaderOptions o;
  o.seq_len = 10;
  o.shuffle = false;
  DataLoader loader = Make({4, 3, 5, 2, 6}, o);
  EXPECT_EQ(loader.stats().rows, 3);  // [4,3] [5,2] [6]: an example never spans rows
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  BatchInfo info;
  TokenBatch b = loader.Next(&info);
  ASSERT_EQ(b.batch_size, 1);
  ASSERT_EQ(b.seq_len, 10);
  EXPECT_EQ(b.input_ids,
            (std::vector<int32_t>{1000, 1001, 1002, 1003, 2000, 2001, 2002, kPad, kPad, kPad}));
  EXPECT_EQ(b.position_ids, (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 0, 0, 0}));
  EXPECT_EQ(b.segment_ids, (std::vector<int32_t>{1, 1, 1, 1, 2, 2, 2, 0, 0, 0}));
  // First token of each document and padding: no loss.
  EXPECT_EQ(b.labels,
            (std::vector<int32_t>{-100, 1001, 1002, 1003, -100, 2001, 2002, -100, -100, -100}));
  EXPECT_EQ(info.real_tokens, 7);
  EXPECT_EQ(info.loss_tokens, 5);
  EXPECT_EQ(info.documents, 2);
  EXPECT_EQ(b.CountLossTokens(), 5);
}

TEST(DataLoaderTest, PaddedRowsAreAsLongAsTheLongestRoundedUp) {
  DataLoaderOptions o;
  o.seq_len = 64;
  o.packing = false;
  o.shuffle = false;
  o.group_by_length = false;
  o.batch_size = 2;
  DataLoader loader = Make({3, 10, 100}, o);
  EXPECT_EQ(loader.stats().truncated, 1);
  TokenBatch b = loader.Next();
  EXPECT_EQ(b.seq_len, 16);  // longest row 10, rounded up to a multiple of 8
  EXPECT_EQ(b.segment_ids[0], 1);
  EXPECT_EQ(b.segment_ids[3], 0);
  EXPECT_EQ(b.input_ids[3], kPad);
  EXPECT_EQ(b.labels[16 + 9], 2009);
  TokenBatch last = loader.Next();
  EXPECT_EQ(last.seq_len, 64);  // the 100-token example, cut to seq_len
  EXPECT_EQ(last.input_ids[63], 3063);
  // Its second row would lie past the data: the batch holds just the one row.
  EXPECT_EQ(last.batch_size, 1);
  EXPECT_EQ(last.input_ids.size(), 64u);
}

TEST(DataLoaderTest, BatchLargerThanTheDataHoldsOnlyTheData) {
  // per_device_batch_size 100000 over 3 examples used to build a 100000-row batch of padding
  // (gigabytes of activations) instead of a batch of 3, as torch's DataLoader gives.
  for (bool packing : {false, true}) {
    DataLoaderOptions o;
    o.seq_len = 16;
    o.packing = packing;
    o.batch_size = 100000;
    DataLoader loader = Make({3, 10, 5}, o);
    EXPECT_EQ(loader.batches_per_epoch(), 1);
    TokenBatch b = loader.Next();
    EXPECT_EQ(b.batch_size, packing ? 2 : 3);  // packed: [10 + 5] and [3], or [10], [3 + 5]
    EXPECT_EQ(b.input_ids.size(), static_cast<size_t>(b.batch_size) * b.seq_len);
    int64_t real = 0;
    for (int32_t s : b.segment_ids) real += s != 0;
    EXPECT_EQ(real, 18);
  }
  // A rank whose slice lies wholly past the data still gets a batch: one row of padding.
  DataLoaderOptions o;
  o.seq_len = 16;
  o.packing = false;
  o.batch_size = 2;
  o.world_size = 2;
  o.rank = 1;
  DataLoader loader = Make({3, 10}, o);
  TokenBatch b = loader.Next();
  EXPECT_EQ(b.batch_size, 1);
  EXPECT_EQ(b.CountLossTokens(), 0);
}

TEST(RngTest, SplitMix64FollowsTheReferenceRecipe) {
  // With the state at 0 the first output is the published SplitMix64 value.
  SplitMix64 rng(0x9E3779B97F4A7C15ULL, 0);
  EXPECT_EQ(rng.Next(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(rng.Next(), 0x6E789E6AA1B965F4ULL);
  // Pinned: changing the shuffle changes every seeded run, so it must not change silently.
  EXPECT_EQ(Permutation(8, 42, 1000), (std::vector<int64_t>{4, 7, 3, 1, 0, 2, 6, 5}));
  SplitMix64 bounded(1, 2);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(bounded.Below(3), 3u);
}

std::vector<std::vector<int32_t>> Drain(DataLoader& loader, int64_t n) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(loader.Next().input_ids);
  return out;
}

TEST(DataLoaderTest, ShuffleIsDeterministicBySeedAndDiffersPerEpoch) {
  std::vector<int> lengths;
  for (int i = 0; i < 40; ++i) lengths.push_back(1 + (i * 7) % 9);
  DataLoaderOptions o;
  o.seq_len = 16;
  o.num_epochs = 2;
  DataLoader a = Make(lengths, o), b = Make(lengths, o);
  int64_t per_epoch = a.batches_per_epoch();
  auto run_a = Drain(a, 2 * per_epoch), run_b = Drain(b, 2 * per_epoch);
  EXPECT_EQ(run_a, run_b);
  std::vector<std::vector<int32_t>> epoch0(run_a.begin(), run_a.begin() + per_epoch);
  std::vector<std::vector<int32_t>> epoch1(run_a.begin() + per_epoch, run_a.end());
  EXPECT_NE(epoch0, epoch1);  // reshuffled...
  std::sort(epoch0.begin(), epoch0.end());
  std::sort(epoch1.begin(), epoch1.end());
  EXPECT_EQ(epoch0, epoch1);  // ...the same rows
  o.seed = 43;
  DataLoader c = Make(lengths, o);
  EXPECT_NE(Drain(c, per_epoch),
            std::vector<std::vector<int32_t>>(run_a.begin(), run_a.begin() + per_epoch));
}

TEST(DataLoaderTest, TheLargestMicroBatchIsBoundedByTheData) {
  DataLoaderOptions o;
  o.packing = false;
  o.seq_len = 64;
  o.batch_size = 100;
  DataLoader padded = Make({5, 17, 9}, o);
  EXPECT_EQ(padded.max_batch_rows(), 3);   // the data has 3 rows
  EXPECT_EQ(padded.max_row_tokens(), 24);  // 17 rounded up to 8
  o.packing = true;
  o.batch_size = 2;
  DataLoader packed = Make({5, 17, 9, 40, 30}, o);
  EXPECT_EQ(packed.max_batch_rows(), 2);
  EXPECT_EQ(packed.max_row_tokens(), 64);
}

TEST(DataLoaderTest, EpochsAndMaxBatchesSetTheTotal) {
  std::vector<int> lengths(10, 4);
  DataLoaderOptions o;
  o.seq_len = 8;  // 2 examples per row: 5 rows
  o.batch_size = 2;
  EXPECT_EQ(Make(lengths, o).batches_per_epoch(), 3);
  EXPECT_EQ(Make(lengths, o).total_batches(), 3);
  o.num_epochs = 2.5;
  EXPECT_EQ(Make(lengths, o).total_batches(), 8);  // ceil(7.5)
  o.max_batches = 20;                              // wins over epochs; epochs repeat as needed
  DataLoader loader = Make(lengths, o);
  EXPECT_EQ(loader.total_batches(), 20);
  BatchInfo info;
  for (int i = 0; i < 20; ++i) loader.Next(&info);
  EXPECT_TRUE(loader.done());
  EXPECT_EQ(info.index, 19);
  EXPECT_EQ(info.epoch, 6);
  EXPECT_NEAR(loader.epoch_progress(), 20.0 / 3, 1e-9);
}

TEST(DataLoaderTest, RanksSeeDisjointSlicesAndTheSameNumberOfBatches) {
  std::vector<int> lengths;
  for (int i = 0; i < 101; ++i) lengths.push_back(1 + (i * 5) % 13);
  for (bool packing : {true, false}) {
    DataLoaderOptions o;
    o.packing = packing;
    o.seq_len = 32;
    o.batch_size = 2;
    o.world_size = 3;
    std::vector<DataLoader> ranks;
    for (int r = 0; r < 3; ++r) {
      o.rank = r;
      ranks.push_back(Make(lengths, o));
    }
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      std::multiset<int64_t> seen;
      for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(ranks[r].batches_per_epoch(), ranks[0].batches_per_epoch());
        for (int64_t k = 0; k < ranks[r].batches_per_epoch(); ++k) {
          int64_t index = epoch * ranks[r].batches_per_epoch() + k;
          for (const auto& row : ranks[r].RowsOfBatch(index)) seen.insert(row.begin(), row.end());
        }
      }
      // Every example exactly once per epoch across the ranks.
      EXPECT_EQ(seen.size(), lengths.size()) << packing;
      EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), lengths.size()) << packing;
    }
  }
}

// The rows of every optimizer step, over every rank and micro-batch, in rank-major order within
// each micro-batch: what a step trains on.
std::vector<std::vector<int64_t>> StepRows(const std::vector<int>& lengths, DataLoaderOptions o,
                                           int64_t steps) {
  std::vector<DataLoader> ranks;
  for (int r = 0; r < o.world_size; ++r) {
    o.rank = r;
    ranks.push_back(Make(lengths, o));
  }
  std::vector<std::vector<int64_t>> out;
  for (int64_t j = 0; j < steps; ++j) {
    std::vector<int64_t> step;
    for (int m = 0; m < o.micro_batches_per_step; ++m) {
      for (auto& rank : ranks) {
        for (const auto& row : rank.RowsOfBatch(j * o.micro_batches_per_step + m)) {
          step.insert(step.end(), row.begin(), row.end());
        }
      }
    }
    out.push_back(step);
  }
  return out;
}

TEST(DataLoaderTest, AStepReadsTheSameRowsHoweverItsGlobalBatchIsSplit) {
  std::vector<int> lengths;
  for (int i = 0; i < 37; ++i) lengths.push_back(1 + (i * 7) % 11);
  for (bool packing : {false, true}) {
    // 8 rows a step as 8 x 1 rank, 4 x 2 ranks, 2 x 2 ranks x 2 micro-batches, 1 x 1 x 8, ...
    const int splits[][3] = {{8, 1, 1}, {4, 2, 1}, {2, 2, 2}, {1, 1, 8}, {2, 1, 4}, {1, 4, 2}};
    std::vector<std::vector<int64_t>> first;
    for (const auto& [batch, world, accumulation] : splits) {
      DataLoaderOptions o;
      o.packing = packing;
      o.seq_len = 12;
      o.batch_size = batch;
      o.world_size = world;
      o.micro_batches_per_step = accumulation;
      DataLoader probe = Make(lengths, o);
      EXPECT_EQ(probe.batches_per_epoch(), probe.steps_per_epoch() * accumulation);
      // Three epochs: the last step of each runs past the data, and the next starts anew.
      std::vector<std::vector<int64_t>> steps = StepRows(lengths, o, 3 * probe.steps_per_epoch());
      if (first.empty()) {
        first = steps;
        continue;
      }
      EXPECT_EQ(steps, first) << "packing " << packing << ", split " << batch << " x " << world
                              << " x " << accumulation;
    }
    ASSERT_FALSE(first.empty());
  }
}

TEST(DataLoaderTest, SeekResumesExactlyWhereASequentialRunIs) {
  std::vector<int> lengths;
  for (int i = 0; i < 30; ++i) lengths.push_back(2 + i % 5);
  DataLoaderOptions o;
  o.seq_len = 12;
  o.num_epochs = 3;
  DataLoader sequential = Make(lengths, o);
  auto all = Drain(sequential, sequential.total_batches());
  DataLoader resumed = Make(lengths, o);
  ASSERT_TRUE(resumed.Seek(7).ok());
  EXPECT_EQ(resumed.position(), 7);
  auto rest = Drain(resumed, resumed.total_batches() - 7);
  EXPECT_EQ(rest, std::vector<std::vector<int32_t>>(all.begin() + 7, all.end()));
  EXPECT_FALSE(resumed.Seek(-1).ok());
}

TEST(DataLoaderTest, LengthGroupingPadsLess) {
  std::vector<int> lengths;
  for (int i = 0; i < 512; ++i)
    lengths.push_back(1 + static_cast<int>(SplitMix64(9, i).Below(200)));
  auto padding = [&](bool group) {
    DataLoaderOptions o;
    o.packing = false;
    o.group_by_length = group;
    o.seq_len = 256;
    o.batch_size = 8;
    DataLoader loader = Make(lengths, o);
    int64_t pad = 0;
    for (int64_t k = 0; k < loader.batches_per_epoch(); ++k) {
      BatchInfo info;
      TokenBatch b = loader.Next(&info);
      pad += int64_t{b.batch_size} * b.seq_len - info.real_tokens;
    }
    return pad;
  };
  EXPECT_LT(padding(true) * 4, padding(false));
}

TEST(DataLoaderTest, BadOptionsNameTheSetting) {
  std::map<std::string, DataLoaderOptions> cases;
  cases["per_device_batch_size: 0"].batch_size = 0;
  cases["max_seq_len: 1"].seq_len = 1;
  cases["rank 2 of world_size 2"].world_size = 2;
  cases["rank 2 of world_size 2"].rank = 2;
  cases["max_steps: -5"].max_batches = -5;
  cases["num_train_epochs: 0"].num_epochs = 0;
  for (const auto& [needle, o] : cases) {
    auto loader = DataLoader::Create(Examples({3}), kPad, o);
    ASSERT_FALSE(loader.ok()) << needle;
    EXPECT_THAT(loader.status().message(), HasSubstr(needle));
  }
  EXPECT_THAT(DataLoader::Create({}, kPad, {}).status().message(), HasSubstr("empty dataset"));
}

}  // namespace
}  // namespace air::engine
