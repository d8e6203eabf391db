// air's own JSON API, for the web UI and scripts:
//   GET /api/air/runs?state=S&experiment=GLOB    runs, newest first (runtime::RunSummaryJson)
//   GET /api/air/runs/<id>                       state, attempts, nodes, failure summary, the
//                                                tracking run it logs to, its events, its alerts
//   GET /api/air/runs/<id>/logs?attempt=K&node=N&offset=B
//                                                node N's log records from byte B on (complete
//                                                lines only) and the offset to ask for next:
//                                                polling it is the live tail
// Run ids, attempts and nodes are integers; the log path is built by runtime::Layout from them,
// never from request text. Log text is returned as JSON strings (the UI inserts it as text).
#include <fmt/format.h>

#include <fstream>

#include "agent/log_format.h"
#include "runtime/layout.h"
#include "runtime/reconcile.h"
#include "runtime/run_lookup.h"
#include "runtime/run_progress.h"
#include "runtime/run_view.h"
#include "server/server_internal.h"
#include "tracking/tracking_store.h"

namespace air::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxLogChunk = 512 * 1024;

Result<int> IntParam(const httplib::Request& req, const char* name, int fallback) {
  if (!req.has_param(name)) return fallback;
  std::string text = req.get_param_value(name);
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 0 || value > 1'000'000) {
    return InvalidArgument(
        fmt::format("'{}' must be a non-negative integer, got '{}'", name, text));
  }
  return static_cast<int>(value);
}

void ListRuns(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto lease = ctx.pool.Acquire();
  if (!lease.ok()) return SendError(res, lease.status());
  store::RunFilter filter;
  if (req.has_param("experiment") && !req.get_param_value("experiment").empty()) {
    filter.experiment_glob = req.get_param_value("experiment");
  }
  std::optional<store::RunState> state;
  if (req.has_param("state") && !req.get_param_value("state").empty()) {
    state = store::ParseRunState(req.get_param_value("state"));
    if (!state) {
      return SendError(res,
                       InvalidArgument("unknown state '" + req.get_param_value("state") + "'"));
    }
  }
  auto runs = (*lease)->ListRuns(filter);
  if (!runs.ok()) return SendError(res, runs.status());
  auto resolved = runtime::ResolveLayout(ctx.air_home, ctx.env);  // config.yaml's shared_root
  if (!resolved.ok()) return SendError(res, resolved.status());
  const runtime::Layout& layout = *resolved;
  int64_t now = ctx.env->NowMicros();
  json items = json::array();
  for (auto& run : *runs) {
    auto current = runtime::ReconcileRun(lease->get(), layout, std::move(run), ctx.env);
    if (!current.ok()) return SendError(res, current.status());
    auto queued = runtime::LoadQueueReason(lease->get(), *current);
    if (!queued.ok()) return SendError(res, queued.status());
    if (state && (queued->empty() ? current->state : store::RunState::kPending) != *state) continue;
    json item = runtime::RunSummaryJson(*current, now, *queued);
    item["backend"] = current->backend;
    auto progress = runtime::LoadRunProgress(lease->get(), layout, *current, ctx.env, now,
                                             runtime::ProgressDetail::kAttemptsOnly);
    if (progress.ok()) item["gpu_hours"] = progress->gpu_hours;
    items.push_back(std::move(item));
  }
  SendJson(res, {{"runs", items}});
}

void GetRunDetails(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto run_id = runtime::ParseRunId(req.matches[1]);
  if (!run_id.ok()) return SendError(res, run_id.status());
  auto lease = ctx.pool.Acquire();
  if (!lease.ok()) return SendError(res, lease.status());
  auto resolved = runtime::ResolveLayout(ctx.air_home, ctx.env);  // config.yaml's shared_root
  if (!resolved.ok()) return SendError(res, resolved.status());
  const runtime::Layout& layout = *resolved;
  auto run = runtime::LoadRun(lease->get(), layout, *run_id, ctx.env);
  if (!run.ok()) return SendError(res, run.status());
  auto details = runtime::LoadRunDetails(lease->get(), *run);
  if (!details.ok()) return SendError(res, details.status());
  auto progress =
      runtime::LoadRunProgress(lease->get(), layout, *run, ctx.env, ctx.env->NowMicros());
  if (progress.ok()) details->progress = std::move(*progress);
  json body = runtime::RunDetailsJson(*details, ctx.env->NowMicros());
  body["backend"] = run->backend;
  auto events = (*lease)->ListEvents(*run_id);
  if (!events.ok()) return SendError(res, events.status());
  json timeline = json::array();
  for (const auto& e : *events) {
    std::string message = e.message;  // an alert's is its JSON record: shown as its headline
    if (e.kind == runtime::kAlertEventKind) {
      for (const auto& alert : runtime::AlertsFromEvents({e}))
        message = runtime::AlertHeadline(alert);
    }
    timeline.push_back({{"ts", runtime::FormatTime(e.ts_us)},
                        {"kind", e.kind},
                        {"attempt", e.attempt ? json(*e.attempt) : json(nullptr)},
                        {"node", e.node_rank ? json(*e.node_rank) : json(nullptr)},
                        {"from", e.from_state ? json(*e.from_state) : json(nullptr)},
                        {"to", e.to_state ? json(*e.to_state) : json(nullptr)},
                        {"message", message}});
  }
  body["events"] = timeline;
  tracking::TrackingStore tracking((*lease)->db(), ctx.env);
  auto link = tracking.GetLink(*run_id);
  if (!link.ok()) return SendError(res, link.status());
  if (*link) {
    body["tracking"] = {{"run_id", (*link)->mlflow_run_id},
                        {"experiment_id", (*link)->experiment_id},
                        {"experiment_name", (*link)->experiment_name},
                        {"external_uri", (*link)->tracking_uri}};
  }
  SendJson(res, body);
}

void GetLogs(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto run_id = runtime::ParseRunId(req.matches[1]);
  if (!run_id.ok()) return SendError(res, run_id.status());
  auto attempt = IntParam(req, "attempt", 0);
  auto node = IntParam(req, "node", 0);
  auto offset = IntParam(req, "offset", 0);
  for (const auto* r : {&attempt, &node, &offset}) {
    if (!r->ok()) return SendError(res, r->status());
  }
  auto resolved = runtime::ResolveLayout(ctx.air_home, ctx.env);  // config.yaml's shared_root
  if (!resolved.ok()) return SendError(res, resolved.status());
  const runtime::Layout& layout = *resolved;
  std::string path = layout.NodeLog(*run_id, *attempt, *node);
  std::ifstream in(path, std::ios::binary);
  json lines = json::array();
  size_t next = static_cast<size_t>(*offset);
  if (in) {
    in.seekg(*offset);
    std::string chunk(kMaxLogChunk, '\0');
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    chunk.resize(static_cast<size_t>(in.gcount()));
    size_t start = 0;
    while (true) {
      size_t nl = chunk.find('\n', start);
      if (nl == std::string::npos) break;
      std::string_view line(chunk.data() + start, nl - start);
      if (auto record = agent::ParseLogLine(line)) {
        lines.push_back(
            {{"ts", record->timestamp}, {"stream", record->stream}, {"text", record->text}});
      } else {
        lines.push_back({{"ts", ""}, {"stream", "raw"}, {"text", std::string(line)}});
      }
      start = nl + 1;
    }
    next += start;
  }
  SendJson(res, {{"path_exists", static_cast<bool>(in) || ctx.env->FileExists(path)},
                 {"lines", lines},
                 {"next_offset", next}});
}

}  // namespace

void RegisterAirRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get("/api/air/runs", [&ctx](const httplib::Request& req, httplib::Response& res) {
    ListRuns(ctx, req, res);
  });
  http.Get(R"(/api/air/runs/([^/]+))", [&ctx](const httplib::Request& req, httplib::Response& res) {
    GetRunDetails(ctx, req, res);
  });
  http.Get(R"(/api/air/runs/([^/]+)/logs)",
           [&ctx](const httplib::Request& req, httplib::Response& res) { GetLogs(ctx, req, res); });
}

}  // namespace air::server
