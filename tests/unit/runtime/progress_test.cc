// Progress figures (runtime/progress.h): GPU-hours per attempt, the step and percent, the rate
// and ETA, time to the first step, nothing invented where the run reported nothing, and the
// step lines of the seed's train.py and air train.
#include "runtime/progress.h"

#include <gtest/gtest.h>

namespace air::runtime {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kT0 = 1'800'000'000LL * kSecond;

TEST(Progress, GpuHoursAreAcceleratorsTimesWallTimePerAttempt) {
  ProgressInputs in;
  in.now_us = kT0 + 7200 * kSecond;
  in.accelerators_per_node = 8;
  in.attempts = {{kT0, kT0 + 1800 * kSecond, 2},            // 2 nodes x 8 GPUs x 0.5 h
                 {kT0 + 3600 * kSecond, std::nullopt, 1}};  // elastic: 1 node, 1 h so far
  RunProgress p = ComputeProgress(in);
  EXPECT_DOUBLE_EQ(p.gpu_hours, 16 * 0.5 + 8 * 1.0);
  EXPECT_EQ(p.accelerators, 8);
  EXPECT_FALSE(p.step);
  EXPECT_FALSE(p.eta_s);
  auto rows = ProgressRows(p);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].first, "gpu-hours");
  EXPECT_EQ(rows[0].second, "16.000 (8 GPUs in the latest attempt)");
}

TEST(Progress, CpuShapesHaveNoGpuHours) {
  ProgressInputs in;
  in.now_us = kT0 + 3600 * kSecond;
  in.attempts = {{kT0, std::nullopt, 2}};
  RunProgress p = ComputeProgress(in);
  EXPECT_EQ(p.gpu_hours, 0);
  EXPECT_TRUE(ProgressRows(p).empty());
  EXPECT_EQ(ProgressJson(p)["gpu_hours"], 0);
  EXPECT_TRUE(ProgressJson(p)["eta_s"].is_null());
  EXPECT_TRUE(ProgressJson(p)["mfu"].is_null());
}

TEST(Progress, RateEtaAndTimeToFirstStep) {
  ProgressInputs in;
  in.live = true;
  in.accelerators_per_node = 1;
  in.attempts = {{kT0, std::nullopt, 1}};
  in.first_step = StepSample{1, kT0 + 30 * kSecond};  // 30 s to the first step
  in.last_step = StepSample{41, kT0 + 50 * kSecond};  // 40 steps in 20 s: 2 steps/s
  in.now_us = kT0 + 50 * kSecond;
  in.max_steps = 101;
  in.step_source = "metrics";
  in.max_steps_source = "param max_steps";
  in.tokens_per_s = 1234.4;
  RunProgress p = ComputeProgress(in);
  EXPECT_EQ(*p.step, 41);
  EXPECT_NEAR(*p.percent, 40.59, 0.01);
  EXPECT_DOUBLE_EQ(*p.steps_per_s, 2.0);
  EXPECT_DOUBLE_EQ(*p.eta_s, 30.0);  // 60 steps left at 2 steps/s
  EXPECT_DOUBLE_EQ(*p.time_to_first_step_s, 30.0);
  auto rows = ProgressRows(p);
  ASSERT_GE(rows.size(), 3u);
  EXPECT_EQ(rows[0].second, "step 41/101 (41%), 2 steps/s, ETA 30.0 s");
  EXPECT_EQ(rows[1].second, "30.0 s after the attempt started");
  EXPECT_EQ(rows[2].second, "1234 tokens/s");
  // No step for 10 s more: the pace so far is 40 steps in 30 s, so the ETA grows to 45 s.
  in.now_us += 10 * kSecond;
  EXPECT_DOUBLE_EQ(*ComputeProgress(in).eta_s, 45.0);
  // An ended run has no ETA.
  in.live = false;
  EXPECT_FALSE(ComputeProgress(in).eta_s);
  // No max_steps: no percent, no ETA.
  in.live = true;
  in.max_steps.reset();
  RunProgress without = ComputeProgress(in);
  EXPECT_FALSE(without.percent);
  EXPECT_FALSE(without.eta_s);
  EXPECT_EQ(ProgressRows(without)[0].second, "step 41, 2 steps/s");
}

TEST(Progress, OneStepGivesNoRate) {
  ProgressInputs in;
  in.live = true;
  in.attempts = {{kT0, std::nullopt, 1}};
  in.first_step = in.last_step = StepSample{5, kT0 + 3 * kSecond};
  in.max_steps = 10;
  in.now_us = kT0 + 4 * kSecond;
  RunProgress p = ComputeProgress(in);
  EXPECT_EQ(*p.step, 5);
  EXPECT_FALSE(p.steps_per_s);
  EXPECT_FALSE(p.eta_s);
}

TEST(Progress, MfuOnlyWhereReported) {
  ProgressInputs in;
  in.attempts = {{kT0, kT0 + kSecond, 1}};
  in.now_us = kT0 + kSecond;
  in.tokens_per_s = 5000;
  in.mfu = 0.423;
  RunProgress p = ComputeProgress(in);
  EXPECT_EQ(ProgressRows(p)[0].second, "5000 tokens/s, MFU 42.3%");
  EXPECT_DOUBLE_EQ(ProgressJson(p)["mfu"].get<double>(), 0.423);
}

TEST(Progress, StepLinesOfTheSeedAndAirTrain) {
  auto seed = FindStepOfTotal("step=12/100 loss=2.3456");
  ASSERT_TRUE(seed);
  EXPECT_EQ(seed->step, 12);
  EXPECT_EQ(seed->total, 100);
  auto train = FindStepOfTotal("step  7/250 | loss 2.1 | lr 1.000e-04 | ETA 1:02");
  ASSERT_TRUE(train);
  EXPECT_EQ(train->step, 7);
  EXPECT_EQ(train->total, 250);
  auto colon = FindStepOfTotal("[rank0] step: 3 / 9");
  ASSERT_TRUE(colon);
  EXPECT_EQ(colon->step, 3);
  for (const char* none : {"max_steps=100/200", "steps 3/9", "step=3", "step 3/0",
                           "global_step=4/8", "no step here", "step /9", "step=3/x"}) {
    EXPECT_FALSE(FindStepOfTotal(none)) << none;
  }
}

}  // namespace
}  // namespace air::runtime
