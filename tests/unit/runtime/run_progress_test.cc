// LoadRunProgress over a real store, tracking tables and node log files: steps from the
// workload's metrics (air's system/ samples and points of earlier attempts left out) with
// max_steps from a param, else from node 0's step=N/M lines (the first in the oldest rotated
// part, the last at the end; air's own records skipped) with the spec's parameters.max_steps;
// GPU-hours over the attempts.
#include "runtime/run_progress.h"

#include <gtest/gtest.h>

#include "agent/log_format.h"
#include "runtime/spec_codec.h"
#include "runtime/tracking_link.h"
#include "test_util.h"
#include "tracking/tracking_store.h"

namespace air::runtime {
namespace {

constexpr int64_t kSecond = 1'000'000;

class RunProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = store::Store::Open(layout_.DbPath(), DefaultEnv());
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
  }

  // A 2 x GPU_8xH100 run with parameters.max_steps 50 and its tracking run in the store.
  store::RunRecord NewRun() {
    spec::WorkloadSpec spec;
    spec.experiment_name = "progress";
    spec.compute = {"GPU_8xH100", 16, spec::AcceleratorKind::kGpu, "H100", 8, 2, 2};
    spec.command = "train";
    spec.parameters_yaml = "max_steps: 50\nlr: 0.1\n";
    store::NewRun run;
    run.experiment = "progress";
    run.spec_json = SpecToJson(spec).dump();
    run.accelerator_type = "GPU_8xH100";
    run.num_nodes = 2;
    run.per_node = 8;
    run.mlflow_run_id = tracking::NewRunId();
    auto created = store_->CreateRun(run);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    EXPECT_TRUE(CreateTrackingRun(store_.get(), spec, created->run, {}, DefaultEnv()).ok());
    return created->run;
  }
  std::string MlflowRun(int64_t run_id) {
    tracking::TrackingStore tracking(store_->db(), DefaultEnv());
    auto link = tracking.GetLink(run_id);
    EXPECT_TRUE(link.ok() && *link);
    return (*link)->mlflow_run_id;
  }
  void LogMetric(int64_t run_id, const std::string& key, double value, int64_t time_us,
                 int64_t step) {
    tracking::TrackingStore tracking(store_->db(), DefaultEnv());
    tracking::Batch batch;
    batch.metrics = {{key, value, time_us / 1000, step}};
    Status logged = tracking.LogBatch(MlflowRun(run_id), batch);
    ASSERT_TRUE(logged.ok()) << logged.ToString();
  }
  void LogLine(const std::string& path, int64_t time_us, const std::string& stream,
               const std::string& text) {
    ASSERT_TRUE(DefaultEnv()->CreateDirs(path.substr(0, path.rfind('/'))).ok());
    ASSERT_TRUE(DefaultEnv()
                    ->AppendToFile(
                        path, agent::FormatLogTimestamp(time_us) + " " + stream + " " + text + "\n")
                    .ok());
  }
  store::AttemptRecord Attempt(int64_t run_id, int attempt) {
    auto attempts = store_->ListAttempts(run_id);
    EXPECT_TRUE(attempts.ok());
    return (*attempts)[attempt];
  }

  testing::TempDir dir_;
  Layout layout_{dir_.path()};
  std::unique_ptr<store::Store> store_;
};

TEST_F(RunProgressTest, StepsFromTheWorkloadsMetricsOfTheLatestAttempt) {
  store::RunRecord run = NewRun();
  ASSERT_TRUE(store_->StartAttempt(run.id, 0, 29500, 2).ok());
  ASSERT_TRUE(store_->FinishAttempt(run.id, 0, store::AttemptState::kFailed, "x").ok());
  ASSERT_TRUE(store_->StartAttempt(run.id, 1, 29501, 1).ok());  // elastic: 1 node
  const int64_t t1 = Attempt(run.id, 1).started_us;
  LogMetric(run.id, "loss", 3.0, t1 - 1 * kSecond, 7);  // logged by attempt 0
  {
    tracking::TrackingStore tracking(store_->db(), DefaultEnv());
    tracking::Batch params;
    params.params = {{"max_steps", "-1"}, {"total_steps", "40"}};  // HF's -1: not a count
    ASSERT_TRUE(tracking.LogBatch(MlflowRun(run.id), params).ok());
  }
  LogMetric(run.id, "train_loss", 2.0, t1 + 5 * kSecond, 11);
  LogMetric(run.id, "system/cpu_utilization_percentage", 9, t1 + 9 * kSecond, 99);
  LogMetric(run.id, "train_loss", 1.0, t1 + 7 * kSecond, 15);
  LogMetric(run.id, "tokens_per_s", 4321, t1 + 7 * kSecond, 15);
  auto progress = LoadRunProgress(store_.get(), layout_, run, DefaultEnv(), t1 + 7 * kSecond);
  ASSERT_TRUE(progress.ok()) << progress.status().ToString();
  EXPECT_EQ(progress->step_source, "metrics");
  EXPECT_EQ(*progress->step, 15);
  EXPECT_EQ(*progress->max_steps, 40);
  EXPECT_EQ(progress->max_steps_source, "param total_steps");
  EXPECT_DOUBLE_EQ(*progress->steps_per_s, 2.0);
  EXPECT_NEAR(*progress->time_to_first_step_s, 5.0, 0.01);
  EXPECT_NEAR(*progress->eta_s, 12.5, 0.01);  // 25 steps at 2 steps/s (ms times)
  EXPECT_EQ(*progress->tokens_per_s, 4321);
  EXPECT_FALSE(progress->mfu);
  EXPECT_EQ(progress->accelerators, 8);
  const store::AttemptRecord a0 = Attempt(run.id, 0);
  const double want = 16.0 * static_cast<double>(*a0.ended_us - a0.started_us) / 3.6e9 +
                      8.0 * static_cast<double>(7 * kSecond) / 3.6e9;
  EXPECT_NEAR(progress->gpu_hours, want, 1e-12);
}

// HF Trainer training by epochs logs max_steps -1, num_train_epochs and an `epoch` metric.
TEST_F(RunProgressTest, MaxStepsFromTheEpochsOfHfTrainer) {
  store::RunRecord run = NewRun();
  ASSERT_TRUE(store_->StartAttempt(run.id, 0, 29500, 2).ok());
  const int64_t t0 = Attempt(run.id, 0).started_us;
  {
    tracking::TrackingStore tracking(store_->db(), DefaultEnv());
    tracking::Batch params;
    params.params = {{"max_steps", "-1"}, {"num_train_epochs", "3.0"}};
    ASSERT_TRUE(tracking.LogBatch(MlflowRun(run.id), params).ok());
  }
  LogMetric(run.id, "loss", 2.0, t0 + 2 * kSecond, 10);
  LogMetric(run.id, "epoch", 0.25, t0 + 2 * kSecond, 10);
  LogMetric(run.id, "loss", 1.0, t0 + 4 * kSecond, 20);
  LogMetric(run.id, "epoch", 0.5, t0 + 4 * kSecond, 20);
  auto progress = LoadRunProgress(store_.get(), layout_, run, DefaultEnv(), t0 + 4 * kSecond);
  ASSERT_TRUE(progress.ok()) << progress.status().ToString();
  EXPECT_EQ(*progress->max_steps, 120);  // 20 steps are half an epoch of 3
  EXPECT_EQ(progress->max_steps_source, "epoch of param num_train_epochs");
  EXPECT_NEAR(*progress->percent, 100.0 * 20 / 120, 1e-9);
}

TEST_F(RunProgressTest, StepsFromNodeZerosLogWithTheSpecsMaxSteps) {
  store::RunRecord run = NewRun();
  ASSERT_TRUE(store_->StartAttempt(run.id, 0, 29500, 2).ok());
  const int64_t t0 = Attempt(run.id, 0).started_us;
  const std::string log = layout_.NodeLog(run.id, 0, 0);
  // The oldest part (rotated to .1) holds the first step.
  LogLine(log + ".1", t0 + 1 * kSecond, "air", "step=999/999 (air's own record: not a step)");
  LogLine(log + ".1", t0 + 2 * kSecond, "out", "World size=16");
  LogLine(log + ".1", t0 + 4 * kSecond, "out", "step=1/50 loss=3.1");
  LogLine(log, t0 + 5 * kSecond, "out", "step=2/50 loss=3.0");
  LogLine(log, t0 + 8 * kSecond, "err", "step=5/50 loss=2.5");
  LogLine(log, t0 + 9 * kSecond, "out", "saving");
  auto progress = LoadRunProgress(store_.get(), layout_, run, DefaultEnv(), t0 + 9 * kSecond);
  ASSERT_TRUE(progress.ok()) << progress.status().ToString();
  EXPECT_EQ(progress->step_source, "log");
  EXPECT_EQ(*progress->step, 5);
  EXPECT_EQ(*progress->max_steps, 50);
  EXPECT_EQ(progress->max_steps_source, "parameters.max_steps");
  EXPECT_DOUBLE_EQ(*progress->steps_per_s, 1.0);
  EXPECT_NEAR(*progress->time_to_first_step_s, 4.0, 1e-3);
  EXPECT_FALSE(progress->tokens_per_s);
  // Only the attempts: no steps read.
  auto attempts_only = LoadRunProgress(store_.get(), layout_, run, DefaultEnv(), t0 + 9 * kSecond,
                                       ProgressDetail::kAttemptsOnly);
  ASSERT_TRUE(attempts_only.ok());
  EXPECT_FALSE(attempts_only->step);
  EXPECT_NEAR(attempts_only->gpu_hours, 16.0 * 9 / 3600, 1e-12);
}

TEST_F(RunProgressTest, ARunThatNeverStartedHasNothing) {
  store::RunRecord run = NewRun();
  auto progress = LoadRunProgress(store_.get(), layout_, run, DefaultEnv(), run.created_us);
  ASSERT_TRUE(progress.ok());
  EXPECT_EQ(progress->gpu_hours, 0);
  EXPECT_FALSE(progress->step);
}

}  // namespace
}  // namespace air::runtime
