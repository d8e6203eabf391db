// The supervisor's side of alerts (runtime/alerts.h) with a real SQLite store and real alerts
// files as agents write them: new complete records become `alert` events in the lines' time
// order, a half-written record waits for its newline, a restarted supervisor (Resume) records
// nothing twice, the first fatal alert leads the failure summary and warnings never do.
#include <gtest/gtest.h>

#include "agent/alert_patterns.h"
#include "agent/alert_scanner.h"
#include "runtime/alerts.h"
#include "runtime/failure.h"
#include "test_util.h"

namespace air::runtime {
namespace {

using air::testing::TempDir;

class AlertIngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = store::Store::Open(layout_.DbPath(), DefaultEnv());
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(*opened);
    store::NewRun run;
    run.experiment = "e";
    run.spec_json = "{}";
    run.mlflow_run_id = "m";
    run.num_nodes = 2;
    run_id_ = store_->CreateRun(run)->run.id;
    ASSERT_TRUE(DefaultEnv()->CreateDirs(layout_.AttemptDir(run_id_, 0)).ok());
  }

  // What node `node`'s agent records for `line` printed at `time_us`.
  void Print(int node, const std::string& line, int64_t time_us) {
    if (scanners_.size() <= static_cast<size_t>(node)) scanners_.resize(node + 1);
    auto& scanner = scanners_[node];
    if (!scanner) {
      scanner = std::make_unique<agent::AlertScanner>(layout_.NodeAlertsFile(run_id_, 0, node),
                                                      DefaultEnv());
    }
    scanner->OnLine("err", line, time_us);
  }

  std::vector<Alert> Recorded() {
    auto events = store_->ListEvents(run_id_);
    EXPECT_TRUE(events.ok());
    return AlertsFromEvents(*events);
  }

  TempDir dir_;
  Layout layout_{dir_.path()};
  std::unique_ptr<store::Store> store_;
  int64_t run_id_ = 0;
  std::vector<std::unique_ptr<agent::AlertScanner>> scanners_;
};

TEST_F(AlertIngestTest, RecordsNewAlertsOnceInTimeOrder) {
  AlertIngester ingester(store_.get(), layout_, DefaultEnv(), run_id_, 0, 2);
  ASSERT_TRUE(ingester.Poll().ok());  // no files yet
  EXPECT_TRUE(Recorded().empty());
  Print(0, "h:1:2 [0] NCCL WARN Call to bind failed: Address already in use", 50);
  Print(0,
        "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=1000) ran for 1061 milliseconds before timing out.",
        300);
  Print(1,
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
        "has a total capacity of 79.10 GiB of which 1.06 GiB is free.",
        200);
  ASSERT_TRUE(ingester.Poll().ok());
  ASSERT_TRUE(ingester.Poll().ok());  // nothing new: nothing recorded twice
  auto events = store_->ListEvents(run_id_);
  ASSERT_TRUE(events.ok());
  std::vector<std::pair<int, std::string>> kinds;  // recorded order, by the lines' times
  for (const auto& e : *events) {
    if (e.kind != kAlertEventKind) continue;
    auto record = agent::AlertRecordFromJson(e.message);
    ASSERT_TRUE(record.ok()) << e.message;
    kinds.emplace_back(*e.node_rank, record->alert_class);
  }
  EXPECT_EQ(kinds, (std::vector<std::pair<int, std::string>>{
                       {0, "nccl_warn"}, {1, "cuda_oom"}, {0, "nccl_timeout"}}));
  // The first *fatal* alert leads: node 1's OOM, not node 0's earlier NCCL warning.
  ASSERT_TRUE(ingester.first().has_value());
  EXPECT_EQ(ingester.first()->node, 1);
  EXPECT_EQ(ingester.first()->record.alert_class, "cuda_oom");
  std::string summary = SummaryWithFirstAlert("node 1 exited with code 1", ingester.first());
  EXPECT_EQ(summary.substr(0, summary.find(" at ")),
            "first alert: CUDA out of memory on node 1, rank 1 (tried 2.00 GiB, gpu 0, total "
            "79.10 GiB, free 1.06 GiB)");
  EXPECT_NE(summary.find("\n  [rank1]: torch.OutOfMemoryError"), std::string::npos) << summary;
  EXPECT_TRUE(summary.ends_with("\nnode 1 exited with code 1")) << summary;
  EXPECT_EQ(SummaryWithFirstAlert("node 1 exited", std::nullopt), "node 1 exited");

  auto alerts = Recorded();
  ASSERT_EQ(alerts.size(), 3u);
  EXPECT_EQ(FirstAlert(alerts)->record.alert_class, "cuda_oom");
  EXPECT_EQ(AlertJson(alerts[2])["fields"]["collective"], "ALLREDUCE");
  EXPECT_EQ(AlertJson(alerts[0])["severity"], "warning");
  EXPECT_EQ(AlertGroupsText(alerts, 2, "  "),
            "  1970-01-01T00:00:00.000Z attempt 0 NCCL warning on node 0 (host h, device 0, "
            "message Call to bind failed: Address already in use)\n"
            "  1970-01-01T00:00:00.000Z attempt 0 CUDA out of memory on node 1, rank 1 (tried "
            "2.00 GiB, gpu 0, total 79.10 GiB, free 1.06 GiB)\n"
            "  ... 1 more (air logs RUN --alerts)\n");
}

TEST_F(AlertIngestTest, AHalfWrittenRecordWaitsAndAResumedSupervisorSkipsWhatIsRecorded) {
  const std::string path = layout_.NodeAlertsFile(run_id_, 0, 1);
  Print(1, "MemoryError", 10);
  // The agent's next record, not yet complete.
  ASSERT_TRUE(DefaultEnv()->AppendToFile(path, R"({"class":"xid","time_us":20)").ok());
  {
    AlertIngester ingester(store_.get(), layout_, DefaultEnv(), run_id_, 0, 2);
    ASSERT_TRUE(ingester.Poll().ok());
    EXPECT_EQ(Recorded().size(), 1u);
  }
  ASSERT_TRUE(DefaultEnv()->AppendToFile(path, "}\n").ok());
  Print(1, "RuntimeError: CUDA error: an illegal memory access was encountered", 30);
  // The supervisor died; its successor adopts the attempt.
  AlertIngester adopter(store_.get(), layout_, DefaultEnv(), run_id_, 0, 2);
  ASSERT_TRUE(adopter.Resume().ok());
  EXPECT_EQ(adopter.first()->record.alert_class, "memory_error");
  ASSERT_TRUE(adopter.Poll().ok());
  std::vector<std::string> classes;
  for (const Alert& alert : Recorded()) classes.push_back(alert.record.alert_class);
  EXPECT_EQ(classes, (std::vector<std::string>{"memory_error", "xid", "cuda_error"}));
  EXPECT_EQ(adopter.first()->record.alert_class, "memory_error");
}

}  // namespace
}  // namespace air::runtime
