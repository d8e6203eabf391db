// Tests for TrackingStore and run search: MLflow's rules (immutable params, metric points stored
// once, latest metric by step/timestamp/value, NaN and inf), a refused batch storing nothing,
// and the search filter and order_by.
#include "tracking/tracking_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>

#include "store/store.h"
#include "tracking/run_search.h"

namespace air::tracking {
namespace {

class TrackingStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/air_tracking_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto opened = store::Store::Open(dir_ + "/air.db", DefaultEnv());
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    tracking_ = std::make_unique<TrackingStore>(store_->db(), DefaultEnv());
  }
  void TearDown() override { ASSERT_TRUE(DefaultEnv()->RemoveAll(dir_).ok()); }

  std::string NewRunIn(const std::string& experiment) {
    auto e = tracking_->GetOrCreateExperiment(experiment);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    NewRun run;
    run.experiment_id = e->experiment_id;
    auto info = tracking_->CreateRun(run);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info->run_id;
  }

  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<TrackingStore> tracking_;
};

TEST_F(TrackingStoreTest, DefaultExperimentExistsAndNamesAreUnique) {
  auto def = tracking_->GetExperiment("0");
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(def->name, "Default");
  ASSERT_TRUE(tracking_->CreateExperiment("a").ok());
  auto again = tracking_->CreateExperiment("a");
  EXPECT_EQ(again.status().code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(again.status().message(), "Experiment 'a' already exists.");
  EXPECT_EQ(tracking_->GetExperiment("x").status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(TrackingStoreTest, ParamsAreImmutableAndARefusedBatchStoresNothing) {
  std::string id = NewRunIn("e");
  Batch first;
  first.params = {{"lr", "0.1"}};
  ASSERT_TRUE(tracking_->LogBatch(id, first).ok());
  ASSERT_TRUE(tracking_->LogBatch(id, first).ok());  // the same value again is fine
  Batch changed;
  changed.metrics = {{"loss", 1.0, 10, 0}};
  changed.params = {{"lr", "0.2"}};
  Status refused = tracking_->LogBatch(id, changed);
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("Changing param values is not allowed. Param with key='lr' "
                                   "was already logged with value='0.1'"),
            std::string::npos)
      << refused.message();
  auto run = tracking_->GetRun(id);
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(run->metrics.empty());  // the metric of the refused batch was not stored
  ASSERT_EQ(run->params.size(), 1u);
  EXPECT_EQ(run->params[0].value, "0.1");
}

TEST_F(TrackingStoreTest, MetricPointsAreStoredOnceAndTheLatestIsByStep) {
  std::string id = NewRunIn("e");
  Batch batch;
  batch.metrics = {{"loss", 3.0, 100, 2},
                   {"loss", 5.0, 200, 1},
                   {"loss", 3.0, 100, 2},
                   {"odd", std::nan(""), 1, 0},
                   {"big", INFINITY, 1, 0}};
  ASSERT_TRUE(tracking_->LogBatch(id, batch).ok());
  ASSERT_TRUE(tracking_->LogBatch(id, batch).ok());  // a retried request
  auto history = tracking_->GetMetricHistory(id, "loss");
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ((*history)[0].step, 1);
  EXPECT_EQ((*history)[1].step, 2);
  auto run = tracking_->GetRun(id);
  ASSERT_TRUE(run.ok());
  for (const Metric& m : run->metrics) {
    if (m.key == "loss") {
      EXPECT_EQ(m.value, 3.0);  // step 2 is the latest, though logged first
    } else if (m.key == "odd") {
      EXPECT_TRUE(std::isnan(m.value));
    } else if (m.key == "big") {
      EXPECT_EQ(m.value, DBL_MAX);
    }
  }
}

TEST_F(TrackingStoreTest, UnknownAndDeletedRuns) {
  auto missing = tracking_->GetRun("0123");
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "Run with id=0123 not found");
  std::string id = NewRunIn("e");
  ASSERT_TRUE(tracking_->SetRunLifecycle(id, "deleted").ok());
  Batch batch;
  batch.tags = {{"t", "v"}};
  Status refused = tracking_->LogBatch(id, batch);
  EXPECT_EQ(refused.message(),
            "The run " + id + " must be in the 'active' state. Current state is deleted.");
}

TEST_F(TrackingStoreTest, SearchFiltersAndOrders) {
  std::vector<tracking::Run> runs(3);
  for (int i = 0; i < 3; ++i) {
    runs[i].info.run_id = "r" + std::to_string(i);
    runs[i].info.status = i == 2 ? "FAILED" : "FINISHED";
    runs[i].metrics = {{"loss", 1.0 + i, 0, 0}};
    runs[i].params = {{"model", i == 0 ? "tiny" : "big"}};
    runs[i].tags = {{"mlflow.runName", "run-" + std::to_string(i)}};
  }
  auto ids = [](const Result<SearchPage>& page) {
    std::vector<std::string> out;
    for (const tracking::Run& r : page->runs) out.push_back(r.info.run_id);
    return out;
  };
  SearchRequest request;
  request.filter = "metrics.loss >= 2 and params.model = 'big'";
  request.order_by = {"metrics.loss DESC"};
  auto page = SearchRuns(runs, request);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(ids(page), (std::vector<std::string>{"r2", "r1"}));
  request.filter = "attributes.status != 'FAILED' AND tags.`mlflow.runName` LIKE 'run-%'";
  request.order_by = {};
  EXPECT_EQ(ids(SearchRuns(runs, request)), (std::vector<std::string>{"r0", "r1"}));
  request.filter = "attributes.run_id IN ('r0', 'r2')";
  request.max_results = 1;
  page = SearchRuns(runs, request);
  EXPECT_EQ(ids(page), (std::vector<std::string>{"r0"}));
  EXPECT_EQ(page->next_page_token, "1");
  request.filter = "metrics.loss > 'x'";
  EXPECT_EQ(SearchRuns(runs, request).status().code(), ErrorCode::kInvalidArgument);
  request.filter = "attributes.stauts = 'x'";
  auto bad = SearchRuns(runs, request);
  EXPECT_NE(bad.status().message().find("did you mean 'status'"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace air::tracking
