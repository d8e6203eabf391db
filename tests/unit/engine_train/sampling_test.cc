// Tests for token sampling: greedy, top-p nucleus limits, seeded determinism, the empirical
// distribution at temperature 1, and option validation.
#include "engine/train/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace air::engine::train {
namespace {

TEST(SamplingTest, GreedyTakesTheFirstLargest) {
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(ArgMax(logits), 1);
  TokenSampler greedy({.temperature = 0.0});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(greedy.Sample(logits), 1);
}

TEST(SamplingTest, SmallTopPKeepsOnlyTheMostLikely) {
  std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.0f};
  TokenSampler sampler({.temperature = 1.0, .top_p = 0.1, .seed = 3});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sampler.Sample(logits), 1);
}

TEST(SamplingTest, TopPExcludesTheTail) {
  // probabilities ~ {0.64, 0.24, 0.09, 0.03}: top_p 0.8 keeps the first two.
  std::vector<float> logits = {3.0f, 2.0f, 1.0f, 0.0f};
  TokenSampler sampler({.temperature = 1.0, .top_p = 0.8, .seed = 5});
  std::map<int, int> counts;
  for (int i = 0; i < 2000; ++i) ++counts[sampler.Sample(logits)];
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_GT(counts[1], 300);
}

TEST(SamplingTest, TemperatureOneFollowsTheSoftmax) {
  std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 0.25, 0.75
  TokenSampler sampler({.temperature = 1.0, .top_p = 1.0, .seed = 11});
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += sampler.Sample(logits) == 1;
  EXPECT_NEAR(ones / double(n), 0.75, 0.02);
}

TEST(SamplingTest, SameSeedSameSequence) {
  std::vector<float> logits = {0.5f, 0.4f, 0.3f, 0.2f, 0.1f};
  TokenSampler a({.temperature = 1.5, .top_p = 0.9, .seed = 42});
  TokenSampler b({.temperature = 1.5, .top_p = 0.9, .seed = 42});
  TokenSampler c({.temperature = 1.5, .top_p = 0.9, .seed = 43});
  std::vector<int> sa, sb, sc;
  for (int i = 0; i < 64; ++i) {
    sa.push_back(a.Sample(logits));
    sb.push_back(b.Sample(logits));
    sc.push_back(c.Sample(logits));
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST(SamplingTest, ValidatesOptions) {
  EXPECT_TRUE(ValidateSamplingOptions({.temperature = 0.7, .top_p = 0.9}).ok());
  Status bad_t = ValidateSamplingOptions({.temperature = -1});
  EXPECT_EQ(bad_t.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad_t.message().find("--temperature"), std::string::npos);
  Status bad_p = ValidateSamplingOptions({.top_p = 0.0});
  EXPECT_NE(bad_p.message().find("--top-p: 0 is out of range: must be in (0, 1]"),
            std::string::npos)
      << bad_p.message();
  EXPECT_FALSE(ValidateSamplingOptions({.top_p = 1.5}).ok());
}

}  // namespace
}  // namespace air::engine::train
