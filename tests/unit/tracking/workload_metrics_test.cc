// The workload's metrics read back from the real tracking tables: the marker changes when the
// workload logs a point and not when air logs a system/ sample; the step span and latest values
// of one attempt (points before its start left out); params.
#include "tracking/workload_metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "store/store.h"
#include "tracking/tracking_store.h"

namespace air::tracking {
namespace {

class WorkloadMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/air_workload_metrics_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto opened = store::Store::Open(dir_ + "/air.db", DefaultEnv());
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    tracking_ = std::make_unique<TrackingStore>(store_->db(), DefaultEnv());
    auto e = tracking_->GetOrCreateExperiment("e");
    ASSERT_TRUE(e.ok());
    NewRun run;
    run.experiment_id = e->experiment_id;
    auto info = tracking_->CreateRun(run);
    ASSERT_TRUE(info.ok());
    run_ = info->run_id;
  }
  void TearDown() override { ASSERT_TRUE(DefaultEnv()->RemoveAll(dir_).ok()); }

  void Log(const std::string& key, double value, int64_t ts, int64_t step) {
    Batch batch;
    batch.metrics = {{key, value, ts, step}};
    ASSERT_TRUE(tracking_->LogBatch(run_, batch).ok());
  }
  std::string Marker() {
    auto marker = WorkloadMetricMarker(store_->db(), run_);
    EXPECT_TRUE(marker.ok()) << marker.status().ToString();
    return marker.ok() ? *marker : "?";
  }

  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<TrackingStore> tracking_;
  std::string run_;
};

TEST_F(WorkloadMetricsTest, MarkerMovesWithTheWorkloadsPointsOnly) {
  EXPECT_EQ(Marker(), "");
  Log("system/cpu_utilization_percentage", 50, 1000, 0);
  EXPECT_EQ(Marker(), "") << "air's own samples are not the workload's";
  Log("loss", 2.0, 1000, 1);
  const std::string first = Marker();
  EXPECT_NE(first, "");
  Log("system/node_0/gpu_0_utilization_percentage", 99, 2000, 0);
  EXPECT_EQ(Marker(), first);
  Log("loss", 1.9, 2000, 2);
  const std::string second = Marker();
  EXPECT_NE(second, first);
  Log("loss", 1.9, 3000, 0);  // no step (mlflow's default step 0) with a later time
  EXPECT_EQ(Marker(), second) << "an older step is not the latest point";
  Log("eval_loss", 2.5, 3000, 0);  // a new key
  EXPECT_NE(Marker(), second);
}

TEST_F(WorkloadMetricsTest, StepSpanOfOneAttempt) {
  auto none = WorkloadStepSpan(store_->db(), run_, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  Log("loss", 3.0, 1000, 5);  // an earlier attempt
  Log("loss", 2.0, 10'000, 3);
  Log("system/cpu_utilization_percentage", 50, 20'000, 900);
  Log("loss", 1.5, 12'000, 4);
  Log("tokens_per_s", 100, 12'000, 4);
  Log("loss", 1.0, 19'000, 8);
  auto span = WorkloadStepSpan(store_->db(), run_, 9'000);
  ASSERT_TRUE(span.ok() && span->has_value());
  EXPECT_EQ((*span)->first.step, 3);
  EXPECT_EQ((*span)->first.timestamp_ms, 10'000);
  EXPECT_EQ((*span)->last.step, 8);
  EXPECT_EQ((*span)->last.timestamp_ms, 19'000);
  auto tokens = LatestMetricValue(store_->db(), run_, "tokens_per_s", 9'000);
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(*tokens, 100.0);
  auto old = LatestMetricValue(store_->db(), run_, "tokens_per_s", 13'000);
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->has_value());
}

TEST_F(WorkloadMetricsTest, Params) {
  Batch batch;
  batch.params = {{"max_steps", "100"}};
  ASSERT_TRUE(tracking_->LogBatch(run_, batch).ok());
  auto value = RunParam(store_->db(), run_, "max_steps");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "100");
  auto missing = RunParam(store_->db(), run_, "total_steps");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

}  // namespace
}  // namespace air::tracking
