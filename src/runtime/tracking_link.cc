// Tracking runs for air runs, and starting the tracking server on demand.
#include "runtime/tracking_link.h"

#include <fmt/format.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "runtime/daemon.h"
#include "spec/node_env.h"
#include "tracking/http_client.h"
#include "tracking/server_files.h"
#include "tracking/tracking_store.h"

namespace air::runtime {
namespace {

constexpr int64_t kServerStartMicros = 20'000'000;

// The server described by server.json answers /health (and its pid is alive).
bool ServerAnswers(const tracking::ServerInfo& info) {
  if (info.pid > 0 && ::kill(static_cast<pid_t>(info.pid), 0) != 0 && errno == ESRCH) return false;
  tracking::HttpClient http;
  auto response = http.Request("GET", info.url + "/health", "", "", 2000);
  return response.ok() && response->status == 200;
}

}  // namespace

Result<std::string> EnsureTrackingServer(const std::string& air_home, Env* env) {
  tracking::ServerFiles files(air_home);
  if (auto info = tracking::ReadServerInfo(files, env); info && ServerAnswers(*info)) {
    return info->url;
  }
  AIR_RETURN_IF_ERROR(env->CreateDirs(files.dir, 0700));
  AIR_ASSIGN_OR_RETURN(std::string air_binary, CurrentExecutable());
  AIR_RETURN_IF_ERROR(StartDetachedAir(
      air_binary, {"server", "--air-home", air_home, "--idle-exit", "900"}, files.LogPath(),
      fmt::format("the tracking server (log {})", files.LogPath())));
  // Another command may start one at the same moment: one of them gets the lock, and both
  // callers find it through server.json.
  int64_t deadline = env->MonotonicMicros() + kServerStartMicros;
  while (env->MonotonicMicros() < deadline) {
    if (auto info = tracking::ReadServerInfo(files, env); info && ServerAnswers(*info)) {
      return info->url;
    }
    env->SleepMicros(50'000);
  }
  return Unavailable(fmt::format("the tracking server did not start within {} s; see {}",
                                 kServerStartMicros / 1'000'000, files.LogPath()));
}

namespace {

// The run on an external MLflow server named by the submitter's MLFLOW_TRACKING_URI: created
// through its REST API; the air run then records the server's run id.
Status CreateExternalTrackingRun(store::Store* store, const spec::WorkloadSpec& spec,
                                 const store::RunRecord& run, const std::string& uri, Env* env) {
  tracking::MlflowRest rest(uri, "");
  std::string experiment_name = spec::MlflowExperimentName(spec);
  auto experiment_id = rest.GetOrCreateExperiment(experiment_name);
  if (!experiment_id.ok()) {
    return Unavailable(
        fmt::format("MLFLOW_TRACKING_URI={}: the MLflow server cannot be used ({}); unset "
                    "MLFLOW_TRACKING_URI to track the run in air's own server",
                    uri, experiment_id.status().message()));
  }
  nlohmann::json tags =
      nlohmann::json::array({{{"key", "air.run_id"}, {"value", std::to_string(run.id)}},
                             {{"key", "air.num_nodes"}, {"value", std::to_string(run.num_nodes)}},
                             {{"key", "air.backend"}, {"value", run.backend}}});
  AIR_ASSIGN_OR_RETURN(
      nlohmann::json created,
      rest.Call("POST", "runs/create",
                {{"experiment_id", *experiment_id},
                 {"run_name", spec.mlflow_run_name.value_or(fmt::format("air-run-{}", run.id))},
                 {"start_time", run.created_us / 1000},
                 {"user_id", env->GetEnv("USER").value_or("")},
                 {"tags", tags}}));
  std::string mlflow_run_id = created["run"]["info"].value("run_id", "");
  if (mlflow_run_id.empty()) return Unavailable(uri + ": runs/create returned no run id");
  AIR_RETURN_IF_ERROR(store->db()->Execute("UPDATE runs SET mlflow_run_id = ? WHERE id = ?",
                                           mlflow_run_id, run.id));
  tracking::TrackingStore tracking(store->db(), env);
  tracking::RunLink link;
  link.air_run_id = run.id;
  link.tracking_uri = uri;
  link.mlflow_run_id = mlflow_run_id;
  link.experiment_id = *experiment_id;
  link.experiment_name = experiment_name;
  return tracking.PutLink(link);
}

}  // namespace

Status CreateTrackingRun(store::Store* store, const spec::WorkloadSpec& spec,
                         const store::RunRecord& run, Env* env) {
  if (auto uri = env->GetEnv("MLFLOW_TRACKING_URI"); uri && !uri->empty()) {
    return CreateExternalTrackingRun(store, spec, run, *uri, env);
  }
  tracking::TrackingStore tracking(store->db(), env);
  std::string experiment_name = spec::MlflowExperimentName(spec);
  AIR_ASSIGN_OR_RETURN(tracking::Experiment experiment,
                       tracking.GetOrCreateExperiment(experiment_name));
  tracking::NewRun created;
  created.experiment_id = experiment.experiment_id;
  created.run_id = run.mlflow_run_id;
  created.run_name = spec.mlflow_run_name.value_or(fmt::format("air-run-{}", run.id));
  created.user_id = env->GetEnv("USER").value_or("");
  created.start_time = run.created_us / 1000;
  created.status = "SCHEDULED";
  created.tags = {{"air.run_id", std::to_string(run.id)},
                  {"air.num_nodes", std::to_string(run.num_nodes)},
                  {"air.backend", run.backend},
                  {"air.accelerator_type", run.accelerator_type},
                  {"mlflow.source.name", run.source_path},
                  {"mlflow.source.type", "JOB"}};
  AIR_RETURN_IF_ERROR(tracking.CreateRun(created).status());
  tracking::RunLink link;
  link.air_run_id = run.id;
  link.mlflow_run_id = run.mlflow_run_id;
  link.experiment_id = experiment.experiment_id;
  link.experiment_name = experiment_name;
  return tracking.PutLink(link);
}

std::vector<std::pair<std::string, std::string>> PrepareTrackingForAttempt(
    store::Store* store, const std::string& air_home, int64_t run_id, Env* env,
    std::string* warning) {
  std::vector<std::pair<std::string, std::string>> vars;
  tracking::TrackingStore tracking(store->db(), env);
  auto link = tracking.GetLink(run_id);
  if (!link.ok() || !*link) return vars;
  std::string uri = (*link)->tracking_uri;
  if (uri.empty()) {
    auto run = tracking.GetRun((*link)->mlflow_run_id);
    if (run.ok() && run->info.status == "SCHEDULED") {
      tracking::RunUpdate update;
      update.status = "RUNNING";
      (void)tracking.UpdateRun((*link)->mlflow_run_id, update);
    }
    auto url = EnsureTrackingServer(air_home, env);
    if (url.ok()) {
      uri = *url;
    } else if (warning != nullptr) {
      *warning = "tracking is off for this attempt: " + url.status().message();
    }
  }
  if (!uri.empty()) vars.emplace_back("MLFLOW_TRACKING_URI", uri);
  vars.emplace_back("MLFLOW_RUN_ID", (*link)->mlflow_run_id);
  vars.emplace_back("MLFLOW_EXPERIMENT_ID", (*link)->experiment_id);
  vars.emplace_back("MLFLOW_EXPERIMENT_NAME", (*link)->experiment_name);
  return vars;
}

std::string TrackingStatusFor(store::RunState state) {
  switch (state) {
    case store::RunState::kSucceeded:
      return "FINISHED";
    case store::RunState::kFailed:
    case store::RunState::kTimedOut:
    case store::RunState::kInternalError:
      return "FAILED";
    case store::RunState::kCanceled:
      return "KILLED";
    default:
      return "";
  }
}

Status FinishTrackingRun(store::Store* store, const store::RunRecord& run, Env* env) {
  std::string status = TrackingStatusFor(run.state);
  if (status.empty()) return Status::Ok();
  tracking::TrackingStore tracking(store->db(), env);
  AIR_ASSIGN_OR_RETURN(auto link, tracking.GetLink(run.id));
  if (!link) return Status::Ok();
  int64_t end_ms = run.ended_us.value_or(env->NowMicros()) / 1000;
  if (!link->tracking_uri.empty()) {
    tracking::MlflowRest rest(link->tracking_uri, "");
    return rest
        .Call("POST", "runs/update",
              {{"run_id", link->mlflow_run_id}, {"status", status}, {"end_time", end_ms}})
        .status();
  }
  tracking::Batch batch;
  batch.tags = {{"air.state", store::RunStateName(run.state)},
                {"air.attempts", std::to_string(run.attempt_count)}};
  if (!run.failure_summary.empty()) {
    batch.tags.push_back({"air.failure_summary", run.failure_summary.substr(0, 8000)});
  }
  AIR_RETURN_IF_ERROR(tracking.LogBatch(link->mlflow_run_id, batch));
  tracking::RunUpdate update;
  update.status = status;
  update.end_time = end_ms;
  return tracking.UpdateRun(link->mlflow_run_id, update).status();
}

}  // namespace air::runtime
