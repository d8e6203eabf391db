// Store: the durable record of experiments, runs, attempts, nodes and events in one SQLite file
// (AIR_HOME/air.db; schema in docs/store-schema.md). Every run state change goes through
// TransitionRun, which checks the transition against the state machine (store/run_state.h) and
// writes the new state and its event row in one transaction: the event log is complete and two
// processes can never both end a run.
//
// Several processes use the store at once (CLI commands, one supervisor per run); each opens its
// own Store. Secret values never reach the store: the spec is stored with secret references
// (scope/key) only.
// Thread safety: one Store per thread (it owns one SQLite connection).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "store/run_state.h"
#include "store/sqlite.h"

namespace air::store {

struct NewRun {
  std::string experiment;
  std::string spec_json;  // the typed spec, secret references only
  std::string source_path;
  std::string accelerator_type;
  int num_nodes = 1;
  int per_node = 1;
  int max_retries = 0;
  std::optional<int> timeout_minutes;
  std::optional<std::string> idempotency_token;
  std::string mlflow_run_id;
  std::optional<std::string> snapshot_id;
  std::string backend = "local";
};

struct RunRecord {
  int64_t id = 0;
  std::string experiment;
  RunState state = RunState::kPending;
  std::string spec_json;
  std::string source_path;
  std::string accelerator_type;
  int num_nodes = 0;
  int per_node = 0;
  int max_retries = 0;
  std::optional<int> timeout_minutes;
  std::optional<std::string> idempotency_token;
  std::string mlflow_run_id;
  std::optional<std::string> snapshot_id;
  std::string backend;
  int64_t created_us = 0;
  std::optional<int64_t> started_us;
  std::optional<int64_t> ended_us;
  std::optional<int64_t> supervisor_pid;
  std::optional<int64_t> supervisor_start_ticks;
  bool cancel_requested = false;
  std::string failure_summary;
  int attempt_count = 0;  // attempts started so far
};

struct AttemptRecord {
  int64_t run_id = 0;
  int attempt = 0;
  AttemptState state = AttemptState::kRunning;
  int master_port = 0;
  int64_t started_us = 0;
  std::optional<int64_t> ended_us;
  std::string failure_summary;
  int num_nodes = 0;  // the attempt's size (its node rows): elastic attempts shrink
};

// How a node's command ended.
struct NodeExit {
  std::optional<int> exit_code;  // set when it exited
  std::optional<int> signal;     // set when a signal killed it
  bool stopped_by_air = false;   // air had asked it to stop before it ended
  int64_t ended_us = 0;
};

struct NodeRecord {
  int64_t run_id = 0;
  int attempt = 0;
  int node_rank = 0;
  NodeState state = NodeState::kStarting;
  std::optional<int64_t> agent_pid;
  std::optional<int64_t> pid;
  std::optional<int64_t> pgid;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<int64_t> started_us;
  std::optional<int64_t> ended_us;
};

struct EventRecord {
  int64_t id = 0;
  int64_t run_id = 0;
  int64_t ts_us = 0;
  std::optional<int> attempt;
  std::optional<int> node_rank;
  std::string kind;  // "state", "attempt", "node", "cancel", "supervisor", ...
  std::optional<std::string> from_state;
  std::optional<std::string> to_state;
  std::string message;
};

struct RunFilter {
  bool include_terminal = true;                // false: only PENDING, RUNNING, TERMINATING
  std::optional<std::string> experiment_glob;  // SQLite GLOB (shell-style, case-sensitive)
  int limit = 0;                               // 0: no limit; newest first
};

struct CreateRunResult {
  RunRecord run;
  bool created = false;  // false: the idempotency token matched an existing run
};

class Store {
 public:
  // Opens (creating and migrating when needed) the store at `db_path`. `env` supplies the clock.
  static Result<std::unique_ptr<Store>> Open(const std::string& db_path, Env* env);

  // Creates a PENDING run (and its experiment on first use) with a "state" event. When the
  // token is set and a run already holds it, returns that run with created = false.
  Result<CreateRunResult> CreateRun(const NewRun& run);
  // kNotFound names the id when there is no such run.
  Result<RunRecord> GetRun(int64_t run_id);
  Result<std::optional<RunRecord>> FindRunByToken(const std::string& token);
  Result<std::vector<RunRecord>> ListRuns(const RunFilter& filter);

  // Moves the run to `to` if that is legal from its current state (and, when `expected_from`
  // is given, only if the run is still in it). Records a "state" event with `message`. Ending
  // states set ended_us and, when non-empty, the failure summary; RUNNING sets started_us.
  // kFailedPrecondition when the transition is not allowed (the run is left unchanged).
  Status TransitionRun(int64_t run_id, RunState to, const std::string& message,
                       std::optional<RunState> expected_from = std::nullopt,
                       const std::string& failure_summary = "");

  // Records the run's supervisor: only for a PENDING run that has none yet, so of two
  // supervisors racing for one run exactly one gets it (the other: kFailedPrecondition).
  Status SetSupervisor(int64_t run_id, int64_t pid, int64_t start_ticks);
  // A new supervisor adopts a live run whose supervisor `dead_pid` is gone (its attempt lives on
  // in a scheduler): only while the run is not terminal and still names `dead_pid`, so of
  // several adopters exactly one gets it (the others: kFailedPrecondition).
  Status AdoptRun(int64_t run_id, int64_t dead_pid, int64_t pid, int64_t start_ticks,
                  const std::string& message);
  // Marks the run for cancellation (idempotent) and records a "cancel" event. Returns the run
  // as it is after the request.
  Result<RunRecord> RequestCancel(int64_t run_id);

  Status AppendEvent(int64_t run_id, const std::string& kind, const std::string& message,
                     std::optional<int> attempt = std::nullopt,
                     std::optional<int> node_rank = std::nullopt);
  Result<std::vector<EventRecord>> ListEvents(int64_t run_id);

  // Attempts and their nodes (store_attempts.cc).
  Status StartAttempt(int64_t run_id, int attempt, int master_port, int num_nodes);
  Status FinishAttempt(int64_t run_id, int attempt, AttemptState state,
                       const std::string& failure_summary);
  Result<std::vector<AttemptRecord>> ListAttempts(int64_t run_id);
  Status RecordNodeStarted(int64_t run_id, int attempt, int node_rank, int64_t agent_pid,
                           int64_t pid, int64_t pgid, int64_t started_us);
  Status RecordNodeEnded(int64_t run_id, int attempt, int node_rank, NodeState state,
                         const NodeExit& exit, const std::string& message);
  Result<std::vector<NodeRecord>> ListNodes(int64_t run_id, int attempt);

  // GPU leases on this host (store_leases.cc): gives (run, attempt) `count` of `devices` (in
  // their order) that no other run that has not ended holds, all or none. Leases of ended runs
  // are dropped on the way. When fewer are free it leases nothing and returns an empty list;
  // *holders (when given) then names the runs holding the others.
  Result<std::vector<std::string>> LeaseDevices(int64_t run_id, int attempt,
                                                const std::vector<std::string>& devices,
                                                size_t count, std::vector<int64_t>* holders);
  // Releases every device the run holds.
  Status ReleaseDevices(int64_t run_id);

  // Removes an ended run and everything the store holds about it (attempts, nodes, events);
  // kNotFound when there is no such run, kFailedPrecondition when it has not ended
  // (store_retention.cc).
  Status DeleteRun(int64_t run_id);

  Database* db() { return db_.get(); }

 private:
  Store(std::unique_ptr<Database> db, Env* env) : db_(std::move(db)), env_(env) {}
  Status InsertEvent(int64_t run_id, const std::string& kind, const std::string& message,
                     std::optional<int> attempt, std::optional<int> node_rank,
                     std::optional<std::string> from_state, std::optional<std::string> to_state);

  std::unique_ptr<Database> db_;
  Env* env_;
};

}  // namespace air::store
