// Tests for the store: schema migrations, runs, idempotency, transitions with their events,
// attempts and nodes, and concurrent use from several processes.
#include "store/store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <set>

#include "store/schema.h"

namespace air::store {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/air_store_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    db_path_ = dir_ + "/air.db";
  }
  void TearDown() override { ASSERT_TRUE(DefaultEnv()->RemoveAll(dir_).ok()); }

  std::unique_ptr<Store> OpenStore() {
    auto store = Store::Open(db_path_, DefaultEnv());
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return std::move(store).value();
  }

  static NewRun SampleRun(const std::string& experiment = "exp-a") {
    NewRun run;
    run.experiment = experiment;
    run.spec_json = R"({"command":"echo hi"})";
    run.source_path = "/tmp/train.yaml";
    run.accelerator_type = "CPU_2";
    run.num_nodes = 2;
    run.per_node = 2;
    run.max_retries = 1;
    run.timeout_minutes = 5;
    run.mlflow_run_id = "abc123";
    return run;
  }

  // Runs `body(i)` in `count` processes at once, each with its own Store, and returns their
  // (pid, exit code) pairs; a process that cannot open the store exits 10.
  std::vector<std::pair<pid_t, int>> RunInProcesses(int count,
                                                    const std::function<int(int, Store&)>& body) {
    std::vector<pid_t> children;
    for (int i = 0; i < count; ++i) {
      pid_t pid = ::fork();
      if (pid == 0) {
        auto store = Store::Open(db_path_, DefaultEnv());
        ::_exit(store.ok() ? body(i, **store) : 10);
      }
      children.push_back(pid);
    }
    std::vector<std::pair<pid_t, int>> exits;
    for (pid_t pid : children) {
      int status = 0;
      EXPECT_GT(pid, 0);
      EXPECT_EQ(::waitpid(pid, &status, 0), pid);
      exits.emplace_back(pid, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    return exits;
  }

  std::string dir_;
  std::string db_path_;
};

TEST_F(StoreTest, FreshDatabaseIsAtLatestVersionInWalMode) {
  auto store = OpenStore();
  EXPECT_EQ(*SchemaVersion(store->db()), LatestSchemaVersion());
  auto stmt = store->db()->Prepare("PRAGMA journal_mode");
  ASSERT_TRUE(stmt.ok());
  ASSERT_TRUE(*stmt->Step());
  EXPECT_EQ(stmt->ColumnText(0), "wal");
}

TEST_F(StoreTest, MigrationFromVersionOneKeepsData) {
  {
    auto db = Database::Open(db_path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(Migrate(db->get(), 1).ok());
    EXPECT_EQ(*SchemaVersion(db->get()), 1);
    ASSERT_TRUE(
        (*db)->Execute("INSERT INTO experiments (name, created_us) VALUES (?, ?)", "old", 1).ok());
  }
  auto store = OpenStore();  // migrates to the latest
  EXPECT_EQ(*SchemaVersion(store->db()), LatestSchemaVersion());
  auto stmt = store->db()->Query(
      "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = ?", "runs_by_experiment");
  ASSERT_TRUE(stmt.ok());
  ASSERT_TRUE(*stmt->Step());
  EXPECT_EQ(stmt->ColumnInt(0), 1);
  auto created = store->CreateRun(SampleRun("old"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->run.experiment, "old");
}

TEST_F(StoreTest, NewerDatabaseIsRefusedWithBothVersions) {
  {
    auto db = Database::Open(db_path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 999").ok());
  }
  auto store = Store::Open(db_path_, DefaultEnv());
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("999"), std::string::npos);
  EXPECT_NE(store.status().message().find(db_path_), std::string::npos);
  EXPECT_NE(store.status().message().find(std::to_string(LatestSchemaVersion())),
            std::string::npos);
}

TEST_F(StoreTest, CreateGetAndListRuns) {
  auto store = OpenStore();
  auto a = store->CreateRun(SampleRun("exp-a"));
  auto b = store->CreateRun(SampleRun("exp-b"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->created);
  EXPECT_EQ(a->run.state, RunState::kPending);
  EXPECT_EQ(b->run.id, a->run.id + 1);
  auto got = store->GetRun(a->run.id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->experiment, "exp-a");
  EXPECT_EQ(got->num_nodes, 2);
  EXPECT_EQ(got->timeout_minutes, 5);
  EXPECT_EQ(got->spec_json, R"({"command":"echo hi"})");

  auto all = store->ListRuns({});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, b->run.id);  // newest first

  RunFilter only_b;
  only_b.experiment_glob = "*-b";
  auto filtered = store->ListRuns(only_b);
  ASSERT_TRUE(filtered.ok());
  ASSERT_EQ(filtered->size(), 1u);
  EXPECT_EQ((*filtered)[0].experiment, "exp-b");

  RunFilter limited;
  limited.limit = 1;
  EXPECT_EQ(store->ListRuns(limited)->size(), 1u);

  auto missing = store->GetRun(4242);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("4242"), std::string::npos);
}

TEST_F(StoreTest, ActiveFilterHidesTerminalRuns) {
  auto store = OpenStore();
  auto a = store->CreateRun(SampleRun());
  auto b = store->CreateRun(SampleRun());
  ASSERT_TRUE(store->TransitionRun(a->run.id, RunState::kCanceled, "cancel").ok());
  RunFilter active;
  active.include_terminal = false;
  auto runs = store->ListRuns(active);
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].id, b->run.id);
}

TEST_F(StoreTest, IdempotencyTokenReturnsTheExistingRun) {
  auto store = OpenStore();
  NewRun run = SampleRun();
  run.idempotency_token = "token-1";
  auto first = store->CreateRun(run);
  auto second = store->CreateRun(run);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE(first->created);
  EXPECT_FALSE(second->created);
  EXPECT_EQ(first->run.id, second->run.id);
  EXPECT_EQ(store->ListRuns({})->size(), 1u);
}

TEST_F(StoreTest, TransitionsFollowTheStateMachineAndRecordEvents) {
  auto store = OpenStore();
  int64_t id = store->CreateRun(SampleRun())->run.id;
  ASSERT_TRUE(store->TransitionRun(id, RunState::kRunning, "supervisor started").ok());
  auto illegal = store->TransitionRun(id, RunState::kPending, "back");
  ASSERT_FALSE(illegal.ok());
  EXPECT_EQ(illegal.code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(illegal.message().find("RUNNING"), std::string::npos);
  ASSERT_TRUE(
      store->TransitionRun(id, RunState::kFailed, "node 1 failed", std::nullopt, "exit 3").ok());
  auto after_end = store->TransitionRun(id, RunState::kSucceeded, "too late");
  EXPECT_FALSE(after_end.ok());

  auto run = store->GetRun(id);
  EXPECT_EQ(run->state, RunState::kFailed);
  EXPECT_EQ(run->failure_summary, "exit 3");
  EXPECT_TRUE(run->started_us.has_value());
  EXPECT_TRUE(run->ended_us.has_value());
  EXPECT_GE(*run->ended_us, *run->started_us);

  auto events = store->ListEvents(id);
  ASSERT_TRUE(events.ok());
  std::vector<std::string> to_states;
  for (const auto& e : *events) {
    if (e.kind == "state") to_states.push_back(e.to_state.value_or(""));
    EXPECT_GT(e.ts_us, 0);
  }
  EXPECT_EQ(to_states, (std::vector<std::string>{"PENDING", "RUNNING", "FAILED"}));
}

TEST_F(StoreTest, ExpectedFromGuardsAgainstRaces) {
  auto store = OpenStore();
  int64_t id = store->CreateRun(SampleRun())->run.id;
  ASSERT_TRUE(store->TransitionRun(id, RunState::kRunning, "go").ok());
  // A cancel got there first: the supervisor's "RUNNING -> SUCCEEDED" must not apply on top of
  // TERMINATING.
  ASSERT_TRUE(store->TransitionRun(id, RunState::kTerminating, "cancel").ok());
  EXPECT_FALSE(store->TransitionRun(id, RunState::kSucceeded, "done", RunState::kRunning).ok());
  EXPECT_FALSE(store->TransitionRun(id, RunState::kSucceeded, "done").ok());
  EXPECT_TRUE(store->TransitionRun(id, RunState::kCanceled, "stopped").ok());
}

TEST_F(StoreTest, CancelRequestIsIdempotentAndRecorded) {
  auto store = OpenStore();
  int64_t id = store->CreateRun(SampleRun())->run.id;
  auto first = store->RequestCancel(id);
  auto second = store->RequestCancel(id);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE(second->cancel_requested);
  int cancel_events = 0;
  auto events = store->ListEvents(id);
  ASSERT_TRUE(events.ok());
  for (const auto& e : *events) cancel_events += e.kind == "cancel";
  EXPECT_EQ(cancel_events, 1);
}

TEST_F(StoreTest, AttemptsAndNodes) {
  auto store = OpenStore();
  int64_t id = store->CreateRun(SampleRun())->run.id;
  ASSERT_TRUE(store->StartAttempt(id, 0, 29500, 2).ok());
  EXPECT_FALSE(store->StartAttempt(id, 0, 29501, 2).ok());  // attempt numbers are unique
  ASSERT_TRUE(store->RecordNodeStarted(id, 0, 1, 100, 101, 101, 5).ok());
  NodeExit exit;
  exit.exit_code = 3;
  ASSERT_TRUE(store->RecordNodeEnded(id, 0, 1, NodeState::kExited, exit, "").ok());
  NodeExit stopped;
  stopped.signal = 15;
  stopped.stopped_by_air = true;
  ASSERT_TRUE(store->RecordNodeEnded(id, 0, 0, NodeState::kStopped, stopped, "").ok());
  ASSERT_TRUE(store->FinishAttempt(id, 0, AttemptState::kFailed, "node 1: exit code 3").ok());
  ASSERT_TRUE(store->StartAttempt(id, 1, 29600, 2).ok());

  auto attempts = store->ListAttempts(id);
  ASSERT_EQ(attempts->size(), 2u);
  EXPECT_EQ((*attempts)[0].state, AttemptState::kFailed);
  EXPECT_EQ((*attempts)[0].failure_summary, "node 1: exit code 3");
  EXPECT_EQ((*attempts)[1].master_port, 29600);
  EXPECT_EQ(store->GetRun(id)->attempt_count, 2);

  auto nodes = store->ListNodes(id, 0);
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].state, NodeState::kStopped);
  EXPECT_EQ((*nodes)[0].signal, 15);
  EXPECT_EQ((*nodes)[1].state, NodeState::kExited);
  EXPECT_EQ((*nodes)[1].exit_code, 3);
  EXPECT_EQ((*nodes)[1].pgid, 101);
  EXPECT_EQ(store->ListNodes(id, 1)->at(0).state, NodeState::kStarting);
  EXPECT_FALSE(store->RecordNodeStarted(id, 0, 7, 1, 1, 1, 1).ok());
}

// Several processes create runs at once; each gets a distinct id, none is lost.
TEST_F(StoreTest, ConcurrentWritersFromSeveralProcesses) {
  { auto store = OpenStore(); }
  constexpr int kProcesses = 4;
  constexpr int kRunsEach = 25;
  auto exits = RunInProcesses(kProcesses, [](int p, Store& store) {
    for (int i = 0; i < kRunsEach; ++i) {
      NewRun run = SampleRun("proc-" + std::to_string(p));
      run.idempotency_token = "shared-" + std::to_string(i % 5);  // contended tokens too
      if (i >= 5) run.idempotency_token.reset();
      auto created = store.CreateRun(run);
      if (!created.ok()) return 11;
      // Only the process that created a run moves it on (a repeat submit with the same
      // token gets the existing run and must leave it alone).
      if (created->created &&
          !store.TransitionRun(created->run.id, RunState::kRunning, "go").ok()) {
        return 12;
      }
    }
    return 0;
  });
  for (const auto& [pid, code] : exits) EXPECT_EQ(code, 0) << "process " << pid;
  auto store = OpenStore();
  auto runs = store->ListRuns({});
  ASSERT_TRUE(runs.ok());
  // 5 shared tokens once each, plus 20 untokened runs per process.
  EXPECT_EQ(runs->size(), 5u + kProcesses * (kRunsEach - 5));
  std::set<int64_t> ids;
  for (const auto& r : *runs) ids.insert(r.id);
  EXPECT_EQ(ids.size(), runs->size());
}

// Two supervisors started for one run (a retried `air supervise`, a double start): exactly one
// records itself, and the recorded pid is the winner's, so the run is never judged by a dead
// loser's pid.
TEST_F(StoreTest, OnlyOneSupervisorClaimsARun) {
  int64_t id = OpenStore()->CreateRun(SampleRun())->run.id;
  auto exits = RunInProcesses(4, [id](int, Store& store) {
    Status claimed = store.SetSupervisor(id, ::getpid(), 0);
    if (claimed.ok()) return 0;
    return claimed.code() == ErrorCode::kFailedPrecondition ? 1 : 11;
  });
  std::vector<pid_t> winners;
  for (const auto& [pid, code] : exits) {
    ASSERT_LE(code, 1) << "process " << pid;
    if (code == 0) winners.push_back(pid);
  }
  ASSERT_EQ(winners.size(), 1u);
  auto store = OpenStore();
  EXPECT_EQ(store->GetRun(id)->supervisor_pid, winners[0]);
  // A run that is already running (or ended) takes no new supervisor either.
  int64_t other = store->CreateRun(SampleRun())->run.id;
  ASSERT_TRUE(store->TransitionRun(other, RunState::kRunning, "go").ok());
  EXPECT_EQ(store->SetSupervisor(other, 42, 0).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(store->SetSupervisor(9999, 42, 0).code(), ErrorCode::kNotFound);
}

// An error of a statement (a constraint here; a read-only file system or a full disk alike)
// names the database file, not only SQLite's words.
TEST_F(StoreTest, StatementErrorsNameTheDatabaseFile) {
  auto store = OpenStore();
  int64_t id = store->CreateRun(SampleRun())->run.id;
  ASSERT_TRUE(store->StartAttempt(id, 0, 29500, 1).ok());
  Status again = store->StartAttempt(id, 0, 29500, 1);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find(db_path_), std::string::npos) << again.message();
}

TEST_F(StoreTest, ValuesAreBoundNotInterpolated) {
  auto store = OpenStore();
  NewRun run = SampleRun("x'); DROP TABLE runs; --");
  auto created = store->CreateRun(run);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(store->GetRun(created->run.id)->experiment, "x'); DROP TABLE runs; --");
}

TEST_F(StoreTest, GpuLeasesAreDisjointAndEndWithTheRun) {
  auto store = OpenStore();
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto created = store->CreateRun(SampleRun());
    ASSERT_TRUE(created.ok());
    ids.push_back(created->run.id);
  }
  const std::vector<std::string> host = {"0", "1", "2", "3"};
  auto a = store->LeaseDevices(ids[0], 0, host, 2, nullptr);
  auto b = store->LeaseDevices(ids[1], 0, host, 2, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(*b, (std::vector<std::string>{"2", "3"}));
  std::vector<int64_t> holders;
  auto none = store->LeaseDevices(ids[2], 0, host, 1, &holders);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(holders, (std::vector<int64_t>{ids[0], ids[1]}));
  // A run that ended holds nothing, even without releasing.
  ASSERT_TRUE(store->TransitionRun(ids[0], RunState::kFailed, "gone").ok());
  auto c = store->LeaseDevices(ids[2], 0, host, 2, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (std::vector<std::string>{"0", "1"}));
  ASSERT_TRUE(store->ReleaseDevices(ids[1]).ok());
  auto again = store->LeaseDevices(ids[0], 1, host, 4, &holders);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());  // run 3 still holds 0 and 1
}

TEST_F(StoreTest, DeleteRunRemovesAnEndedRunOnly) {
  auto store = OpenStore();
  auto created = store->CreateRun(SampleRun());
  ASSERT_TRUE(created.ok());
  int64_t id = created->run.id;
  ASSERT_TRUE(store->StartAttempt(id, 0, 1234, 2).ok());
  Status live = store->DeleteRun(id);
  EXPECT_EQ(live.code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(live.message().find("air cancel"), std::string::npos);
  ASSERT_TRUE(store->TransitionRun(id, RunState::kCanceled, "stop").ok());
  ASSERT_TRUE(store->DeleteRun(id).ok());
  EXPECT_EQ(store->GetRun(id).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(store->ListEvents(id)->empty());
  EXPECT_TRUE(store->ListAttempts(id)->empty());
  EXPECT_EQ(store->DeleteRun(id).code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace air::store
