// Store: attempts and their nodes, each change with its event row.
#include <fmt/format.h>

#include "store/store.h"

namespace air::store {
namespace {

std::string DescribeExit(const NodeExit& exit) {
  if (exit.signal) return fmt::format("killed by signal {}", *exit.signal);
  if (exit.exit_code) return fmt::format("exit code {}", *exit.exit_code);
  return "no exit status";
}

}  // namespace

Status Store::StartAttempt(int64_t run_id, int attempt, int master_port, int num_nodes) {
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  const int64_t now = env_->NowMicros();
  AIR_RETURN_IF_ERROR(
      db_->Execute("INSERT INTO attempts (run_id, attempt, state, master_port, started_us) "
                   "VALUES (?, ?, ?, ?, ?)",
                   run_id, attempt, AttemptStateName(AttemptState::kRunning), master_port, now));
  for (int rank = 0; rank < num_nodes; ++rank) {
    AIR_RETURN_IF_ERROR(
        db_->Execute("INSERT INTO nodes (run_id, attempt, node_rank, state) VALUES (?, ?, ?, ?)",
                     run_id, attempt, rank, NodeStateName(NodeState::kStarting)));
  }
  AIR_RETURN_IF_ERROR(InsertEvent(run_id, "attempt",
                                  fmt::format("attempt {} started: {} node(s), MASTER_PORT={}",
                                              attempt, num_nodes, master_port),
                                  attempt, std::nullopt, std::nullopt,
                                  AttemptStateName(AttemptState::kRunning)));
  return txn->Commit();
}

Status Store::FinishAttempt(int64_t run_id, int attempt, AttemptState state,
                            const std::string& failure_summary) {
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  AIR_RETURN_IF_ERROR(
      db_->Execute("UPDATE attempts SET state = ?, ended_us = ?, failure_summary = ? "
                   "WHERE run_id = ? AND attempt = ?",
                   AttemptStateName(state), env_->NowMicros(), failure_summary, run_id, attempt));
  if (db_->ChangedRows() == 0) {
    return NotFound(fmt::format("run {} has no attempt {}", run_id, attempt));
  }
  std::string message = fmt::format("attempt {} ended {}", attempt, AttemptStateName(state));
  if (!failure_summary.empty()) message += ": " + failure_summary;
  AIR_RETURN_IF_ERROR(InsertEvent(run_id, "attempt", message, attempt, std::nullopt,
                                  AttemptStateName(AttemptState::kRunning),
                                  AttemptStateName(state)));
  return txn->Commit();
}

Result<std::vector<AttemptRecord>> Store::ListAttempts(int64_t run_id) {
  AIR_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Query("SELECT a.run_id, a.attempt, a.state, a.master_port, a.started_us, a.ended_us, "
                 "a.failure_summary, (SELECT COUNT(*) FROM nodes n WHERE n.run_id = a.run_id "
                 "AND n.attempt = a.attempt) FROM attempts a WHERE a.run_id = ? "
                 "ORDER BY a.attempt",
                 run_id));
  std::vector<AttemptRecord> attempts;
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    AttemptRecord a;
    a.run_id = stmt.ColumnInt(0);
    a.attempt = static_cast<int>(stmt.ColumnInt(1));
    auto state = ParseAttemptState(stmt.ColumnText(2));
    if (!state) {
      return DataLoss(fmt::format("run {} attempt {} has an unknown state '{}' in the store",
                                  a.run_id, a.attempt, stmt.ColumnText(2)));
    }
    a.state = *state;
    a.master_port = static_cast<int>(stmt.ColumnInt(3));
    a.started_us = stmt.ColumnInt(4);
    a.ended_us = stmt.ColumnOptionalInt(5);
    a.failure_summary = stmt.ColumnOptionalText(6).value_or("");
    a.num_nodes = static_cast<int>(stmt.ColumnInt(7));
    attempts.push_back(std::move(a));
  }
  return attempts;
}

Status Store::RecordNodeStarted(int64_t run_id, int attempt, int node_rank, int64_t agent_pid,
                                int64_t pid, int64_t pgid, int64_t started_us) {
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  AIR_RETURN_IF_ERROR(
      db_->Execute("UPDATE nodes SET state = ?, agent_pid = ?, pid = ?, pgid = ?, started_us = ? "
                   "WHERE run_id = ? AND attempt = ? AND node_rank = ?",
                   NodeStateName(NodeState::kRunning), agent_pid, pid, pgid, started_us, run_id,
                   attempt, node_rank));
  if (db_->ChangedRows() == 0) {
    return NotFound(fmt::format("run {} attempt {} has no node {}", run_id, attempt, node_rank));
  }
  AIR_RETURN_IF_ERROR(InsertEvent(
      run_id, "node",
      fmt::format("node {} started: pid {}, process group {}", node_rank, pid, pgid), attempt,
      node_rank, NodeStateName(NodeState::kStarting), NodeStateName(NodeState::kRunning)));
  return txn->Commit();
}

Status Store::RecordNodeEnded(int64_t run_id, int attempt, int node_rank, NodeState state,
                              const NodeExit& exit, const std::string& message) {
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  AIR_ASSIGN_OR_RETURN(Statement current,
                       db_->Query("SELECT state FROM nodes WHERE run_id = ? AND attempt = ? "
                                  "AND node_rank = ?",
                                  run_id, attempt, node_rank));
  AIR_ASSIGN_OR_RETURN(bool row, current.Step());
  if (!row) {
    return NotFound(fmt::format("run {} attempt {} has no node {}", run_id, attempt, node_rank));
  }
  std::string from = current.ColumnText(0);
  AIR_RETURN_IF_ERROR(db_->Execute(
      "UPDATE nodes SET state = ?, exit_code = ?, signal = ?, ended_us = ? "
      "WHERE run_id = ? AND attempt = ? AND node_rank = ?",
      NodeStateName(state), exit.exit_code, exit.signal,
      exit.ended_us != 0 ? exit.ended_us : env_->NowMicros(), run_id, attempt, node_rank));
  std::string text =
      fmt::format("node {} {}: {}", node_rank, state == NodeState::kStopped ? "stopped" : "ended",
                  DescribeExit(exit));
  if (!message.empty()) text += " (" + message + ")";
  AIR_RETURN_IF_ERROR(
      InsertEvent(run_id, "node", text, attempt, node_rank, from, NodeStateName(state)));
  return txn->Commit();
}

Result<std::vector<NodeRecord>> Store::ListNodes(int64_t run_id, int attempt) {
  AIR_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Query("SELECT run_id, attempt, node_rank, state, agent_pid, pid, pgid, exit_code, "
                 "signal, started_us, ended_us FROM nodes WHERE run_id = ? AND attempt = ? "
                 "ORDER BY node_rank",
                 run_id, attempt));
  std::vector<NodeRecord> nodes;
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    NodeRecord n;
    n.run_id = stmt.ColumnInt(0);
    n.attempt = static_cast<int>(stmt.ColumnInt(1));
    n.node_rank = static_cast<int>(stmt.ColumnInt(2));
    auto state = ParseNodeState(stmt.ColumnText(3));
    if (!state) {
      return DataLoss(fmt::format("run {} node {} has an unknown state '{}' in the store", n.run_id,
                                  n.node_rank, stmt.ColumnText(3)));
    }
    n.state = *state;
    n.agent_pid = stmt.ColumnOptionalInt(4);
    n.pid = stmt.ColumnOptionalInt(5);
    n.pgid = stmt.ColumnOptionalInt(6);
    n.exit_code = stmt.ColumnOptionalInt32(7);
    n.signal = stmt.ColumnOptionalInt32(8);
    n.started_us = stmt.ColumnOptionalInt(9);
    n.ended_us = stmt.ColumnOptionalInt(10);
    nodes.push_back(std::move(n));
  }
  return nodes;
}

}  // namespace air::store
