// JSON and text views of runs.
#include "runtime/run_view.h"

#include <fmt/format.h>

#include <ctime>

#include "base/strings.h"
#include "base/time_format.h"

namespace air::runtime {
namespace {

using nlohmann::json;

int64_t DurationOf(const store::RunRecord& run, int64_t now_us) {
  if (!run.started_us) return 0;
  return run.ended_us.value_or(now_us) - *run.started_us;
}

json JsonOrNull(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }
json JsonOrNull(const std::optional<int>& v) { return v ? json(*v) : json(nullptr); }

std::string NodeText(const store::NodeRecord& n) {
  std::string text = fmt::format("node {} {}", n.node_rank, store::NodeStateName(n.state));
  if (n.exit_code) text += fmt::format(" (exit {})", *n.exit_code);
  if (n.signal) text += fmt::format(" (signal {})", *n.signal);
  return text;
}

// The scheduler's latest queue reason and note for the live attempt of a RUNNING run.
Status LoadSchedulerView(store::Store* store, const store::RunRecord& run,
                         const std::vector<store::AttemptRecord>& attempts, RunDetails* details) {
  if (attempts.empty() || run.state != store::RunState::kRunning ||
      attempts.back().state != store::AttemptState::kRunning) {
    return Status::Ok();
  }
  const int live = attempts.back().attempt;
  AIR_ASSIGN_OR_RETURN(auto events, store->ListEvents(run.id));
  for (const auto& event : events) {
    if (event.attempt != live) continue;
    if (event.kind == "queue") details->queue_reason = event.message;
    if (event.kind == "scheduler") details->scheduler_note = event.message;
  }
  return Status::Ok();
}

// "PENDING (Resources)" in at most `width` characters.
std::string QueuedStateText(const std::string& reason, size_t width) {
  std::string text = "PENDING (" + reason + ")";
  if (text.size() <= width) return text;
  return text.substr(0, width - 4) + "...)";
}

}  // namespace

Result<RunDetails> LoadRunDetails(store::Store* store, const store::RunRecord& run) {
  RunDetails details;
  details.run = run;
  AIR_ASSIGN_OR_RETURN(details.attempts, store->ListAttempts(run.id));
  for (const auto& attempt : details.attempts) {
    AIR_ASSIGN_OR_RETURN(auto nodes, store->ListNodes(run.id, attempt.attempt));
    details.nodes.push_back(std::move(nodes));
  }
  AIR_RETURN_IF_ERROR(LoadSchedulerView(store, run, details.attempts, &details));
  AIR_ASSIGN_OR_RETURN(auto events, store->ListEvents(run.id));
  details.alerts = AlertsFromEvents(events);
  return details;
}

Result<std::string> LoadQueueReason(store::Store* store, const store::RunRecord& run) {
  if (run.state != store::RunState::kRunning) return std::string();
  RunDetails details;
  AIR_ASSIGN_OR_RETURN(auto attempts, store->ListAttempts(run.id));
  AIR_RETURN_IF_ERROR(LoadSchedulerView(store, run, attempts, &details));
  return details.queue_reason;
}

std::string FormatDuration(int64_t micros) {
  if (micros < 0) micros = 0;
  double seconds = static_cast<double>(micros) / 1e6;
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  int64_t total = micros / 1'000'000;
  if (total < 3600) return fmt::format("{} min {} s", total / 60, total % 60);
  return fmt::format("{} h {} min", total / 3600, (total % 3600) / 60);
}

std::string FormatTime(int64_t micros) { return FormatUtcTimestamp(micros, 3); }

json RunSummaryJson(const store::RunRecord& run, int64_t now_us, const std::string& queue_reason) {
  json out{{"run_id", run.id},
           {"experiment", run.experiment},
           {"state", store::RunStateName(run.state)},
           {"accelerator_type", run.accelerator_type},
           {"num_nodes", run.num_nodes},
           {"per_node", run.per_node},
           {"attempts", run.attempt_count},
           {"max_retries", run.max_retries},
           {"timeout_minutes", JsonOrNull(run.timeout_minutes)},
           {"created_us", run.created_us},
           {"created", FormatTime(run.created_us)},
           {"started_us", JsonOrNull(run.started_us)},
           {"ended_us", JsonOrNull(run.ended_us)},
           {"duration_s", static_cast<double>(DurationOf(run, now_us)) / 1e6},
           {"cancel_requested", run.cancel_requested},
           {"failure_summary", run.failure_summary}};
  if (!queue_reason.empty()) {
    out["state"] = "PENDING";
    out["queue_reason"] = queue_reason;
  }
  return out;
}

json RunDetailsJson(const RunDetails& details, int64_t now_us) {
  const store::RunRecord& run = details.run;
  json out = RunSummaryJson(run, now_us, details.queue_reason);
  if (!details.scheduler_note.empty()) out["scheduler"] = details.scheduler_note;
  out["source_path"] = run.source_path;
  out["mlflow_run_id"] = run.mlflow_run_id;
  out["snapshot_id"] = run.snapshot_id ? json(*run.snapshot_id) : json(nullptr);
  out["idempotency_token"] = run.idempotency_token ? json(*run.idempotency_token) : json(nullptr);
  out["backend"] = run.backend;
  out["supervisor_pid"] = JsonOrNull(run.supervisor_pid);
  json attempts = json::array();
  for (size_t i = 0; i < details.attempts.size(); ++i) {
    const auto& a = details.attempts[i];
    json nodes = json::array();
    for (const auto& n : details.nodes[i]) {
      nodes.push_back({{"node_rank", n.node_rank},
                       {"state", store::NodeStateName(n.state)},
                       {"agent_pid", JsonOrNull(n.agent_pid)},
                       {"pid", JsonOrNull(n.pid)},
                       {"pgid", JsonOrNull(n.pgid)},
                       {"exit_code", JsonOrNull(n.exit_code)},
                       {"signal", JsonOrNull(n.signal)},
                       {"started_us", JsonOrNull(n.started_us)},
                       {"ended_us", JsonOrNull(n.ended_us)}});
    }
    attempts.push_back({{"attempt", a.attempt},
                        {"state", store::AttemptStateName(a.state)},
                        {"num_nodes", a.num_nodes},
                        {"world_size", a.num_nodes * run.per_node},
                        {"master_port", a.master_port},
                        {"started_us", a.started_us},
                        {"ended_us", JsonOrNull(a.ended_us)},
                        {"failure_summary", a.failure_summary},
                        {"nodes", nodes}});
  }
  out["attempt_details"] = attempts;
  out["alerts"] = json::array();
  for (const Alert& alert : details.alerts) out["alerts"].push_back(AlertJson(alert));
  if (details.progress) out["progress"] = ProgressJson(*details.progress);
  return out;
}

std::string RunDetailsText(const RunDetails& details, int64_t now_us) {
  const store::RunRecord& run = details.run;
  std::string text =
      details.queue_reason.empty()
          ? fmt::format("run {}  {}\n", run.id, store::RunStateName(run.state))
          : fmt::format("run {}  PENDING (queued: {})\n", run.id, details.queue_reason);
  auto row = [&text](const std::string& key, const std::string& value) {
    text += fmt::format("  {:<12} {}\n", key, value);
  };
  row("experiment", run.experiment);
  row("nodes", fmt::format("{} x {} ({} worker{} per node)", run.num_nodes, run.accelerator_type,
                           run.per_node, run.per_node == 1 ? "" : "s"));
  row("attempts", fmt::format("{} (max_retries {})", run.attempt_count, run.max_retries));
  if (run.timeout_minutes) row("timeout", fmt::format("{} min", *run.timeout_minutes));
  row("created", FormatTime(run.created_us));
  if (run.started_us) {
    row("duration",
        FormatDuration(DurationOf(run, now_us)) + (run.ended_us ? "" : " (still running)"));
  }
  if (details.progress) {
    for (const auto& [key, value] : ProgressRows(*details.progress)) row(key, value);
  }
  row("mlflow run", run.mlflow_run_id);
  row("spec", run.source_path);
  if (!details.scheduler_note.empty()) row("scheduler", details.scheduler_note);
  if (run.cancel_requested && !store::IsTerminal(run.state)) row("cancel", "requested");
  if (!run.failure_summary.empty()) {
    std::vector<std::string> lines = Split(run.failure_summary, '\n');
    row("failure", lines[0]);
    for (size_t i = 1; i < lines.size(); ++i) text += fmt::format("  {:<12} {}\n", "", lines[i]);
  }
  for (size_t i = 0; i < details.attempts.size(); ++i) {
    const auto& a = details.attempts[i];
    std::vector<std::string> nodes;
    for (const auto& n : details.nodes[i]) nodes.push_back(NodeText(n));
    int64_t took = a.ended_us.value_or(now_us) - a.started_us;
    text += fmt::format("  attempt {:<4} {:<10} {:<8} port {:<6} {:<9} {}\n", a.attempt,
                        store::AttemptStateName(a.state),
                        fmt::format("{} node{}", a.num_nodes, a.num_nodes == 1 ? "" : "s"),
                        a.master_port, FormatDuration(took), Join(nodes, ", "));
  }
  if (!details.alerts.empty()) {
    row("alerts", fmt::format("{} (air logs {} --alerts)", details.alerts.size(), run.id));
    text += AlertGroupsText(details.alerts, 8, std::string(15, ' '));
  }
  text += fmt::format("  logs: air logs {} --node N [--retry K]\n", run.id);
  return text;
}

std::string RunListText(const std::vector<store::RunRecord>& runs, int64_t now_us,
                        const std::vector<std::string>& queue_reasons) {
  if (runs.empty()) return "no runs (air list --all-status shows finished ones)\n";
  constexpr size_t kStateWidth = 22;  // "PENDING (Resources)" fits, longer reasons are cut
  std::string text = fmt::format("{:<6} {:<22} {:<28} {:<12} {:>8} {:>10}  {}\n", "RUN", "STATE",
                                 "EXPERIMENT", "COMPUTE", "ATTEMPTS", "DURATION", "CREATED");
  for (size_t i = 0; i < runs.size(); ++i) {
    const store::RunRecord& run = runs[i];
    const std::string reason = i < queue_reasons.size() ? queue_reasons[i] : "";
    text += fmt::format(
        "{:<6} {:<22} {:<28} {:<12} {:>8} {:>10}  {}\n", run.id,
        reason.empty() ? store::RunStateName(run.state) : QueuedStateText(reason, kStateWidth),
        run.experiment, fmt::format("{}x{}", run.num_nodes, run.accelerator_type),
        run.attempt_count, FormatDuration(DurationOf(run, now_us)), FormatTime(run.created_us));
  }
  return text;
}

}  // namespace air::runtime
