// Fault injection through the Env seam (base/env.h EnvWrapper: everything real but the one call
// a test breaks) and real SQLite faults: a full disk while a node's log, a snapshot or the store
// is written, a busy database, a torn node exit report. Each must end in a clear error or a
// retried operation; never a corrupt store, a half-written snapshot, a process left running
// or a run left RUNNING.
#include <errno.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "agent/agent.h"
#include "agent/node_launch.h"
#include "base/env_wrapper.h"
#include "runtime/failure.h"
#include "runtime/layout.h"
#include "runtime/reconcile.h"
#include "runtime/snapshot.h"
#include "store/store.h"
#include "test_util.h"
#include "unit/fault_env.h"

namespace air {
namespace {

using air::testing::ProcessesWithEnv;
using air::testing::TempDir;

TEST(FaultTest, DiskFullWhileWritingTheNodeLogFailsTheNodeAndLeavesNothing) {
  TempDir dir;
  const std::string marker = "AIR_FAULT_TEST_MARKER=" + std::to_string(::getpid());
  agent::NodeLaunch launch;
  launch.run_id = 1;
  launch.command =
      "for i in $(seq 50); do echo line $i; done; sleep 60 & (setsid sleep 61 &); wait";
  launch.workdir = dir.path();
  // A real full disk: every write to /dev/full fails with ENOSPC.
  launch.log_path = "/dev/full";
  launch.started_path = dir.path() + "/node_0.started";
  launch.exit_path = dir.path() + "/node_0.exit";
  launch.env = {{"AIR_FAULT_TEST_MARKER", std::to_string(::getpid())}};
  launch.grace_seconds = 1;
  const std::string launch_path = dir.path() + "/node_0.json";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(launch_path, agent::NodeLaunchToJson(launch)).ok());

  pid_t pid = ::fork();
  if (pid == 0) ::_exit(agent::AgentMain(launch_path, DefaultEnv()));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  auto report = agent::ReadNodeExitReport(DefaultEnv(), launch.exit_path);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_NE(report->error.find("No space left on device"), std::string::npos) << report->error;
  EXPECT_NE(runtime::DescribeNodeEnding(*report).find("could not run: write node log"),
            std::string::npos);
  // The command and everything it started died with the agent's failure.
  EXPECT_TRUE(ProcessesWithEnv(marker).empty());
}

TEST(FaultTest, DiskFullWhileWritingASnapshotLeavesNoManifestAndARetryWorks) {
  TempDir home, code;
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(code.path() + "/train.py", "print(1)\n").ok());
  spec::SnapshotSpec snapshot;
  snapshot.root_path = code.path();
  snapshot.resolved_root = code.path();
  auto listing = spec::ScanSnapshot(snapshot, DefaultEnv());
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  runtime::Layout layout(home.path());

  testing::FaultEnv full;  // a full disk under snapshots/
  full.FailWritesUnder(layout.SnapshotsDir(), ENOSPC);
  auto failed = runtime::ArchiveSnapshot(layout, *listing, &full);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("No space left on device"), std::string::npos)
      << failed.status().ToString();
  auto manifests = DefaultEnv()->ListDir(layout.SnapshotsDir());
  EXPECT_TRUE(!manifests.ok() || manifests->empty());

  auto archived = runtime::ArchiveSnapshot(layout, *listing, DefaultEnv());
  ASSERT_TRUE(archived.ok()) << archived.status().ToString();
  auto loaded = runtime::LoadSnapshot(layout, archived->id, DefaultEnv());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->entries.size(), 1u);
}

class StoreFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_path_ = dir_.path() + "/air.db";
    auto store = store::Store::Open(db_path_, DefaultEnv());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    store::NewRun run;
    run.experiment = "faults";
    run.spec_json = R"({"command":"true"})";
    run.source_path = "/tmp/w.yaml";
    run.accelerator_type = "CPU_1";
    run.num_nodes = 1;
    run.per_node = 1;
    run.mlflow_run_id = "m";
    auto created = store_->CreateRun(run);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    run_id_ = created->run.id;
  }

  std::string IntegrityCheck() {
    auto stmt = store_->db()->Query("PRAGMA integrity_check");
    if (!stmt.ok()) return stmt.status().ToString();
    auto row = stmt->Step();
    if (!row.ok() || !*row) return "no row";
    return stmt->ColumnText(0);
  }

  TempDir dir_;
  std::string db_path_;
  std::unique_ptr<store::Store> store_;
  int64_t run_id_ = 0;
};

TEST_F(StoreFaultTest, DiskFullWhileWritingTheStoreIsAClearErrorAndNothingIsHalfDone) {
  // A real SQLITE_FULL: the database may not grow past the pages it has.
  auto pages = store_->db()->Query("PRAGMA page_count");
  ASSERT_TRUE(pages.ok());
  ASSERT_TRUE(*pages->Step());
  const int64_t count = pages->ColumnInt(0);
  ASSERT_TRUE(store_->db()->Exec("PRAGMA max_page_count = " + std::to_string(count)).ok());
  Status full = Status::Ok();
  for (int i = 0; i < 2000 && full.ok(); ++i) {
    full = store_->AppendEvent(run_id_, "filler", std::string(2000, 'x'));
  }
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.code(), ErrorCode::kResourceExhausted) << full.ToString();
  EXPECT_NE(full.message().find("full"), std::string::npos) << full.ToString();
  // A state change in a full store fails whole: the run stays as it was, the store is intact.
  Status moved =
      store_->TransitionRun(run_id_, store::RunState::kRunning, "claim", store::RunState::kPending);
  if (!moved.ok()) {
    EXPECT_EQ(moved.code(), ErrorCode::kResourceExhausted) << moved.ToString();
    EXPECT_EQ(store_->GetRun(run_id_)->state, store::RunState::kPending);
  }
  EXPECT_EQ(IntegrityCheck(), "ok");
  // Space again: the same operations work.
  ASSERT_TRUE(store_->db()->Exec("PRAGMA max_page_count = 1073741823").ok());
  if (!moved.ok()) {
    ASSERT_TRUE(store_->TransitionRun(run_id_, store::RunState::kRunning, "claim").ok());
  }
  EXPECT_EQ(store_->GetRun(run_id_)->state, store::RunState::kRunning);
  EXPECT_EQ(IntegrityCheck(), "ok");
}

TEST_F(StoreFaultTest, BusyDatabaseIsRetriedUntilTheLockIsReleased) {
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(db_path_.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::atomic<bool> released{false};
  std::thread holder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    released = true;
    sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
  });
  // The writer waits on the lock (busy timeout) instead of failing at once.
  Status moved = store_->TransitionRun(run_id_, store::RunState::kRunning, "claim");
  holder.join();
  sqlite3_close(other);
  ASSERT_TRUE(moved.ok()) << moved.ToString();
  EXPECT_TRUE(released.load());
  EXPECT_EQ(store_->GetRun(run_id_)->state, store::RunState::kRunning);
  EXPECT_EQ(IntegrityCheck(), "ok");
}

TEST_F(StoreFaultTest, TornExitReportOfADeadSupervisorsRunEndsItNotRunning) {
  runtime::Layout layout(dir_.path());
  // A run whose supervisor is gone (a pid that exited) with an open attempt and one node that
  // wrote an exit report, torn.
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  ASSERT_TRUE(store_->SetSupervisor(run_id_, gone, 1).ok());
  ASSERT_TRUE(store_->TransitionRun(run_id_, store::RunState::kRunning, "claim").ok());
  ASSERT_TRUE(store_->StartAttempt(run_id_, 0, 29500, 1).ok());
  ASSERT_TRUE(store_->RecordNodeStarted(run_id_, 0, 0, gone, gone, gone, 1).ok());
  ASSERT_TRUE(DefaultEnv()->CreateDirs(layout.AttemptDir(run_id_, 0)).ok());
  agent::NodeExitReport report;
  report.exit_code = 0;
  report.ended_us = 2;
  ASSERT_TRUE(
      DefaultEnv()
          ->WriteFileAtomic(layout.NodeExitFile(run_id_, 0, 0), agent::NodeExitReportToJson(report))
          .ok());

  testing::FaultEnv torn;  // the node's exit report reads back as its first half
  torn.TearReadsUnder(layout.NodeExitFile(run_id_, 0, 0));
  auto run = store_->GetRun(run_id_);
  ASSERT_TRUE(run.ok());
  auto reconciled = runtime::ReconcileRun(store_.get(), layout, *run, &torn);
  ASSERT_TRUE(reconciled.ok()) << reconciled.status().ToString();
  EXPECT_EQ(reconciled->state, store::RunState::kInternalError);
  auto attempts = store_->ListAttempts(run_id_);
  ASSERT_TRUE(attempts.ok());
  EXPECT_TRUE((*attempts)[0].ended_us.has_value());
  auto nodes = store_->ListNodes(run_id_, 0);
  ASSERT_TRUE(nodes.ok());
  // The torn report is not taken for a success: the node is LOST.
  EXPECT_EQ((*nodes)[0].state, store::NodeState::kLost);
  EXPECT_EQ(IntegrityCheck(), "ok");
}

}  // namespace
}  // namespace air
