// Store: opening, runs, state transitions and events. Attempts and nodes: store_attempts.cc.
#include "store/store.h"

#include <fmt/format.h>

#include "store/schema.h"

namespace air::store {
namespace {

constexpr const char* kRunColumns =
    "r.id, e.name, r.state, r.spec_json, r.source_path, r.accelerator_type, r.num_nodes, "
    "r.per_node, r.max_retries, r.timeout_minutes, r.idempotency_token, r.mlflow_run_id, "
    "r.snapshot_id, r.backend, r.created_us, r.started_us, r.ended_us, r.supervisor_pid, "
    "r.supervisor_start_ticks, r.cancel_requested, r.failure_summary, "
    "(SELECT COUNT(*) FROM attempts a WHERE a.run_id = r.id)";

constexpr const char* kRunFrom = " FROM runs r JOIN experiments e ON e.id = r.experiment_id ";

Result<RunRecord> ReadRun(const Statement& stmt) {
  RunRecord run;
  run.id = stmt.ColumnInt(0);
  run.experiment = stmt.ColumnText(1);
  std::string state = stmt.ColumnText(2);
  auto parsed = ParseRunState(state);
  if (!parsed) {
    return DataLoss(fmt::format("run {} has an unknown state '{}' in the store", run.id, state));
  }
  run.state = *parsed;
  run.spec_json = stmt.ColumnText(3);
  run.source_path = stmt.ColumnText(4);
  run.accelerator_type = stmt.ColumnText(5);
  run.num_nodes = static_cast<int>(stmt.ColumnInt(6));
  run.per_node = static_cast<int>(stmt.ColumnInt(7));
  run.max_retries = static_cast<int>(stmt.ColumnInt(8));
  run.timeout_minutes = stmt.ColumnOptionalInt32(9);
  run.idempotency_token = stmt.ColumnOptionalText(10);
  run.mlflow_run_id = stmt.ColumnText(11);
  run.snapshot_id = stmt.ColumnOptionalText(12);
  run.backend = stmt.ColumnText(13);
  run.created_us = stmt.ColumnInt(14);
  run.started_us = stmt.ColumnOptionalInt(15);
  run.ended_us = stmt.ColumnOptionalInt(16);
  run.supervisor_pid = stmt.ColumnOptionalInt(17);
  run.supervisor_start_ticks = stmt.ColumnOptionalInt(18);
  run.cancel_requested = stmt.ColumnInt(19) != 0;
  run.failure_summary = stmt.ColumnOptionalText(20).value_or("");
  run.attempt_count = static_cast<int>(stmt.ColumnInt(21));
  return run;
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Open(const std::string& db_path, Env* env) {
  AIR_ASSIGN_OR_RETURN(auto db, Database::Open(db_path));
  AIR_RETURN_IF_ERROR(Migrate(db.get()));
  return std::unique_ptr<Store>(new Store(std::move(db), env));
}

Status Store::InsertEvent(int64_t run_id, const std::string& kind, const std::string& message,
                          std::optional<int> attempt, std::optional<int> node_rank,
                          std::optional<std::string> from_state,
                          std::optional<std::string> to_state) {
  return db_->Execute(
      "INSERT INTO events (run_id, ts_us, attempt, node_rank, kind, from_state, to_state, "
      "message) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      run_id, env_->NowMicros(), attempt, node_rank, kind, from_state, to_state, message);
}

Result<std::optional<RunRecord>> Store::FindRunByToken(const std::string& token) {
  AIR_ASSIGN_OR_RETURN(Statement stmt, db_->Query(std::string("SELECT ") + kRunColumns + kRunFrom +
                                                      "WHERE r.idempotency_token = ?",
                                                  token));
  AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return std::optional<RunRecord>();
  AIR_ASSIGN_OR_RETURN(RunRecord run, ReadRun(stmt));
  return std::optional<RunRecord>(std::move(run));
}

Result<CreateRunResult> Store::CreateRun(const NewRun& run) {
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  if (run.idempotency_token) {
    // Inside the write transaction: a concurrent submit with the same token waits for us and
    // then finds our run.
    AIR_ASSIGN_OR_RETURN(auto existing, FindRunByToken(*run.idempotency_token));
    if (existing) return CreateRunResult{std::move(*existing), false};
  }
  const int64_t now = env_->NowMicros();
  AIR_RETURN_IF_ERROR(db_->Execute(
      "INSERT INTO experiments (name, created_us) VALUES (?, ?) ON CONFLICT(name) DO NOTHING",
      run.experiment, now));
  AIR_RETURN_IF_ERROR(db_->Execute(
      "INSERT INTO runs (experiment_id, state, spec_json, source_path, accelerator_type, "
      "num_nodes, per_node, max_retries, timeout_minutes, idempotency_token, mlflow_run_id, "
      "snapshot_id, backend, created_us) "
      "VALUES ((SELECT id FROM experiments WHERE name = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      run.experiment, RunStateName(RunState::kPending), run.spec_json, run.source_path,
      run.accelerator_type, run.num_nodes, run.per_node, run.max_retries, run.timeout_minutes,
      run.idempotency_token, run.mlflow_run_id, run.snapshot_id, run.backend, now));
  const int64_t run_id = db_->LastInsertRowId();
  AIR_RETURN_IF_ERROR(InsertEvent(run_id, "state", "run created", std::nullopt, std::nullopt,
                                  std::nullopt, RunStateName(RunState::kPending)));
  AIR_RETURN_IF_ERROR(txn->Commit());
  AIR_ASSIGN_OR_RETURN(RunRecord created, GetRun(run_id));
  return CreateRunResult{std::move(created), true};
}

Result<RunRecord> Store::GetRun(int64_t run_id) {
  AIR_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Query(std::string("SELECT ") + kRunColumns + kRunFrom + "WHERE r.id = ?", run_id));
  AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row)
    return NotFound(fmt::format("run {} does not exist (see `air list --all-status`)", run_id));
  return ReadRun(stmt);
}

Result<std::vector<RunRecord>> Store::ListRuns(const RunFilter& filter) {
  std::string sql = std::string("SELECT ") + kRunColumns + kRunFrom +
                    "WHERE (? = 1 OR r.state IN ('PENDING', 'RUNNING', 'TERMINATING')) "
                    "AND (? IS NULL OR e.name GLOB ?) ORDER BY r.id DESC LIMIT ?";
  AIR_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Query(sql, filter.include_terminal, filter.experiment_glob, filter.experiment_glob,
                 filter.limit > 0 ? int64_t{filter.limit} : int64_t{-1}));
  std::vector<RunRecord> runs;
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    AIR_ASSIGN_OR_RETURN(RunRecord run, ReadRun(stmt));
    runs.push_back(std::move(run));
  }
  return runs;
}

Status Store::TransitionRun(int64_t run_id, RunState to, const std::string& message,
                            std::optional<RunState> expected_from,
                            const std::string& failure_summary) {
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  AIR_ASSIGN_OR_RETURN(RunRecord run, GetRun(run_id));
  if (expected_from && run.state != *expected_from) {
    return FailedPrecondition(fmt::format("run {} is {}, not {}", run_id, RunStateName(run.state),
                                          RunStateName(*expected_from)));
  }
  if (!IsLegalTransition(run.state, to)) {
    return FailedPrecondition(fmt::format("run {} cannot go from {} to {}", run_id,
                                          RunStateName(run.state), RunStateName(to)));
  }
  const int64_t now = env_->NowMicros();
  if (IsTerminal(to)) {
    AIR_RETURN_IF_ERROR(db_->Execute(
        "UPDATE runs SET state = ?, ended_us = ?, "
        "failure_summary = CASE WHEN ? = '' THEN failure_summary ELSE ? END WHERE id = ?",
        RunStateName(to), now, failure_summary, failure_summary, run_id));
  } else if (to == RunState::kRunning) {
    AIR_RETURN_IF_ERROR(
        db_->Execute("UPDATE runs SET state = ?, started_us = COALESCE(started_us, ?) WHERE id = ?",
                     RunStateName(to), now, run_id));
  } else {
    AIR_RETURN_IF_ERROR(
        db_->Execute("UPDATE runs SET state = ? WHERE id = ?", RunStateName(to), run_id));
  }
  AIR_RETURN_IF_ERROR(InsertEvent(run_id, "state", message, std::nullopt, std::nullopt,
                                  RunStateName(run.state), RunStateName(to)));
  return txn->Commit();
}

Status Store::SetSupervisor(int64_t run_id, int64_t pid, int64_t start_ticks) {
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  AIR_ASSIGN_OR_RETURN(RunRecord run, GetRun(run_id));
  if (run.supervisor_pid) {
    return FailedPrecondition(
        fmt::format("run {} already has a supervisor (pid {})", run_id, *run.supervisor_pid));
  }
  if (run.state != RunState::kPending) {
    return FailedPrecondition(fmt::format("run {} is {}: only a PENDING run takes a supervisor",
                                          run_id, RunStateName(run.state)));
  }
  AIR_RETURN_IF_ERROR(
      db_->Execute("UPDATE runs SET supervisor_pid = ?, supervisor_start_ticks = ? WHERE id = ?",
                   pid, start_ticks, run_id));
  AIR_RETURN_IF_ERROR(InsertEvent(run_id, "supervisor", fmt::format("supervisor pid {}", pid),
                                  std::nullopt, std::nullopt, std::nullopt, std::nullopt));
  return txn->Commit();
}

Status Store::AdoptRun(int64_t run_id, int64_t dead_pid, int64_t pid, int64_t start_ticks,
                       const std::string& message) {
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  AIR_ASSIGN_OR_RETURN(RunRecord run, GetRun(run_id));
  if (IsTerminal(run.state) || run.supervisor_pid.value_or(0) != dead_pid) {
    return FailedPrecondition(fmt::format("run {} is {} with supervisor pid {}: not adopted",
                                          run_id, RunStateName(run.state),
                                          run.supervisor_pid.value_or(0)));
  }
  AIR_RETURN_IF_ERROR(
      db_->Execute("UPDATE runs SET supervisor_pid = ?, supervisor_start_ticks = ? WHERE id = ?",
                   pid, start_ticks, run_id));
  AIR_RETURN_IF_ERROR(InsertEvent(run_id, "supervisor", message, std::nullopt, std::nullopt,
                                  std::nullopt, std::nullopt));
  return txn->Commit();
}

Result<RunRecord> Store::RequestCancel(int64_t run_id) {
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  AIR_ASSIGN_OR_RETURN(RunRecord run, GetRun(run_id));
  if (!run.cancel_requested && !IsTerminal(run.state)) {
    AIR_RETURN_IF_ERROR(db_->Execute("UPDATE runs SET cancel_requested = 1 WHERE id = ?", run_id));
    AIR_RETURN_IF_ERROR(InsertEvent(run_id, "cancel", "cancel requested", std::nullopt,
                                    std::nullopt, std::nullopt, std::nullopt));
  }
  AIR_RETURN_IF_ERROR(txn->Commit());
  return GetRun(run_id);
}

Status Store::AppendEvent(int64_t run_id, const std::string& kind, const std::string& message,
                          std::optional<int> attempt, std::optional<int> node_rank) {
  return InsertEvent(run_id, kind, message, attempt, node_rank, std::nullopt, std::nullopt);
}

Result<std::vector<EventRecord>> Store::ListEvents(int64_t run_id) {
  AIR_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Query("SELECT id, run_id, ts_us, attempt, node_rank, kind, from_state, to_state, "
                 "message FROM events WHERE run_id = ? ORDER BY id",
                 run_id));
  std::vector<EventRecord> events;
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    EventRecord e;
    e.id = stmt.ColumnInt(0);
    e.run_id = stmt.ColumnInt(1);
    e.ts_us = stmt.ColumnInt(2);
    e.attempt = stmt.ColumnOptionalInt32(3);
    e.node_rank = stmt.ColumnOptionalInt32(4);
    e.kind = stmt.ColumnText(5);
    e.from_state = stmt.ColumnOptionalText(6);
    e.to_state = stmt.ColumnOptionalText(7);
    e.message = stmt.ColumnText(8);
    events.push_back(std::move(e));
  }
  return events;
}

}  // namespace air::store
