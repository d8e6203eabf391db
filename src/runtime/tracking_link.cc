// Tracking runs for air runs, and starting the tracking server on demand.
#include "runtime/tracking_link.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "backends/cluster_registry.h"
#include "base/private_dir.h"
#include "base/strings.h"
#include "runtime/daemon.h"
#include "secrets/resolve.h"
#include "spec/node_env.h"
#include "tracking/http_client.h"
#include "tracking/server_files.h"
#include "tracking/tracking_store.h"

namespace air::runtime {
namespace {

constexpr int64_t kServerStartMicros = 20'000'000;

// Air's credentials for its own server: the token of server.token.
tracking::Credentials OwnCredentials(const tracking::ServerFiles& files, Env* env) {
  tracking::Credentials credentials;
  if (auto token = tracking::ServerToken(files, env); token.ok()) credentials.token = *token;
  return credentials;
}

// The server described by server.json answers /health with our token (and its pid is alive).
bool ServerAnswers(const tracking::ServerInfo& info, const tracking::Credentials& credentials) {
  if (info.pid > 0 && ::kill(static_cast<pid_t>(info.pid), 0) != 0 && errno == ESRCH) return false;
  tracking::HttpClient http;
  auto response = http.Request("GET", info.url + "/health", "", credentials, 2000);
  return response.ok() && response->status == 200;
}

// The server runs with config.yaml's tracking_server settings (a port of 0 takes any).
// Without a tracking_server block any running server is used as it is (one a user started).
bool MatchesConfig(const tracking::ServerInfo& info, const backends::TrackingServerConfig& want) {
  if (!want.configured) return true;
  return info.host == want.host && (want.port == 0 || info.port == want.port);
}

// Stops a running server whose settings config.yaml no longer names, and waits until it is gone.
void StopServer(const tracking::ServerInfo& info, Env* env) {
  if (info.pid <= 0 || ::kill(static_cast<pid_t>(info.pid), SIGTERM) != 0) return;
  const int64_t deadline = env->MonotonicMicros() + 5'000'000;
  while (env->MonotonicMicros() < deadline && ::kill(static_cast<pid_t>(info.pid), 0) == 0) {
    env->SleepMicros(50'000);
  }
}

// The host nodes connect to: advertise_host, else the bound host, else (bound to every
// address) this machine's name.
std::string NodeHost(const tracking::ServerInfo& info, const backends::TrackingServerConfig& want) {
  if (!want.advertise_host.empty()) return want.advertise_host;
  if (info.host != "0.0.0.0" && info.host != "::" && !info.host.empty()) return info.host;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return info.host;
  return name;
}

}  // namespace

Result<std::string> EnsureTrackingServer(const std::string& air_home, Env* env) {
  tracking::ServerFiles files(air_home);
  AIR_ASSIGN_OR_RETURN(backends::ClusterConfig config,
                       backends::LoadClusterConfig(air_home, "", env));
  const backends::TrackingServerConfig& want = config.tracking_server;
  AIR_RETURN_IF_ERROR(MakePrivateDir(air_home, env, "AIR_HOME"));
  // Created here before the server starts, so that both ends read the same one.
  const tracking::Credentials credentials = OwnCredentials(files, env);
  if (auto info = tracking::ReadServerInfo(files, env); info && ServerAnswers(*info, credentials)) {
    if (MatchesConfig(*info, want)) return info->url;
    StopServer(*info, env);
  }
  AIR_RETURN_IF_ERROR(MakePrivateDir(files.dir, env));
  AIR_ASSIGN_OR_RETURN(std::string air_binary, CurrentExecutable());
  std::vector<std::string> args = {"server", "--air-home", air_home, "--idle-exit",
                                   "900",    "--host",     want.host};
  if (want.port != 0) args.insert(args.end(), {"--port", std::to_string(want.port)});
  AIR_RETURN_IF_ERROR(
      StartDetachedAir(air_binary, args, files.LogPath(),
                       fmt::format("the tracking server (log {})", files.LogPath())));
  // Another command may start one at the same moment: one of them gets the lock, and both
  // callers find it through server.json.
  int64_t deadline = env->MonotonicMicros() + kServerStartMicros;
  while (env->MonotonicMicros() < deadline) {
    if (auto info = tracking::ReadServerInfo(files, env);
        info && ServerAnswers(*info, credentials)) {
      return info->url;
    }
    env->SleepMicros(50'000);
  }
  return Unavailable(fmt::format("the tracking server did not start within {} s; see {}",
                                 kServerStartMicros / 1'000'000, files.LogPath()));
}

tracking::Credentials ExternalTracking::Credentials() const {
  tracking::Credentials credentials;
  for (const auto& [name, value] : secret_env) {
    if (name == "MLFLOW_TRACKING_TOKEN") credentials.token = value;
    if (name == "MLFLOW_TRACKING_USERNAME") credentials.username = value;
    if (name == "MLFLOW_TRACKING_PASSWORD") credentials.password = value;
  }
  return credentials;
}

Result<ExternalTracking> ResolveTrackingCredentials(const backends::TrackingConfig& config,
                                                    const std::string& uri,
                                                    const std::string& air_home, Env* env) {
  ExternalTracking external;
  external.uri = uri;
  std::vector<std::pair<std::string, spec::SecretRef>> refs;
  std::vector<std::string> named;
  auto add = [&](const char* variable, const char* key, const std::string& path) {
    if (path.empty()) return;
    size_t slash = path.find('/');  // checked when config.yaml was read
    refs.emplace_back(variable, spec::SecretRef{path.substr(0, slash), path.substr(slash + 1)});
    named.push_back(fmt::format("{} {}", key, path));
  };
  add("MLFLOW_TRACKING_TOKEN", "tracking_token_secret", config.token_secret);
  add("MLFLOW_TRACKING_USERNAME", "tracking_username_secret", config.username_secret);
  add("MLFLOW_TRACKING_PASSWORD", "tracking_password_secret", config.password_secret);
  external.secrets_named = Join(named, ", ");
  if (refs.empty()) return external;
  secrets::SecretStore secret_store(env, air_home);
  auto resolved = secrets::ResolveSecrets(secret_store, refs);
  if (!resolved.ok()) {
    return Status(
        resolved.status().code(),
        fmt::format("{}: {}: air's credentials for the MLflow server {} cannot be read: "
                    "{}",
                    config.config_path, external.secrets_named, uri, resolved.status().message()));
  }
  external.secret_env = std::move(*resolved);
  return external;
}

Result<ExternalTracking> CheckExternalTracking(const backends::TrackingConfig& config,
                                               const std::string& air_home, Env* env) {
  std::string uri, named_by, fix;
  if (auto from_env = env->GetEnv("MLFLOW_TRACKING_URI"); from_env && !from_env->empty()) {
    uri = *from_env;
    named_by = "MLFLOW_TRACKING_URI=" + uri;
    fix = "unset MLFLOW_TRACKING_URI to track the run in air's own server";
  } else if (!config.uri.empty()) {
    uri = config.uri;
    named_by = fmt::format("{}: tracking_uri {}", config.config_path, uri);
    fix = "correct tracking_uri there, or remove it to track runs in air's own server";
  } else {
    return ExternalTracking{};
  }
  AIR_ASSIGN_OR_RETURN(ExternalTracking external,
                       ResolveTrackingCredentials(config, uri, air_home, env));
  external.named_by = named_by;
  tracking::MlflowRest rest(uri, external.Credentials());
  auto probe = rest.Call("GET", "experiments/search", {{"max_results", 1}});
  if (probe.ok()) return external;
  if (probe.status().code() == ErrorCode::kPermissionDenied) {
    std::string where = config.config_path.empty() ? "AIR_HOME/config.yaml" : config.config_path;
    std::string check =
        external.secrets_named.empty()
            ? fmt::format(
                  "it needs credentials: name air secrets in {} as tracking_token_secret "
                  "(a Bearer token) or tracking_username_secret and "
                  "tracking_password_secret (basic auth)",
                  where)
            : fmt::format("check the air secret{} {} ({})",
                          external.secret_env.size() == 1 ? "" : "s", external.secrets_named,
                          where);
    return PermissionDenied(
        fmt::format("{}: the MLflow server cannot be used: it refused air's credentials ({}); {}",
                    named_by, probe.status().message(), check));
  }
  return Status(probe.status().code(), fmt::format("{}: the MLflow server cannot be used ({}); {}",
                                                   named_by, probe.status().message(), fix));
}

namespace {

// The run on the external MLflow server: created through its REST API; the air run then
// records the server's run id.
Status CreateExternalTrackingRun(store::Store* store, const spec::WorkloadSpec& spec,
                                 const store::RunRecord& run, const ExternalTracking& external,
                                 Env* env) {
  const std::string& uri = external.uri;
  tracking::MlflowRest rest(uri, external.Credentials());
  std::string experiment_name = spec::MlflowExperimentName(spec);
  auto experiment_id = rest.GetOrCreateExperiment(experiment_name);
  if (!experiment_id.ok()) {
    return Status(experiment_id.status().code(),
                  fmt::format("{}: the MLflow server cannot be used ({})", external.named_by,
                              experiment_id.status().message()));
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
                         const store::RunRecord& run, const ExternalTracking& external, Env* env) {
  if (!external.uri.empty()) return CreateExternalTrackingRun(store, spec, run, external, env);
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

AttemptTracking PrepareTrackingForAttempt(store::Store* store, const std::string& air_home,
                                          int64_t run_id, const backends::TrackingConfig& config,
                                          Env* env) {
  AttemptTracking out;
  auto& vars = out.env;
  tracking::TrackingStore tracking(store->db(), env);
  auto link = tracking.GetLink(run_id);
  if (!link.ok() || !*link) return out;
  std::string uri = (*link)->tracking_uri;
  if (!uri.empty()) {
    auto external = ResolveTrackingCredentials(config, uri, air_home, env);
    if (external.ok()) {
      out.secret_env = std::move(external->secret_env);
    } else {
      out.warning =
          "the nodes get no credentials for the tracking server: " + external.status().message();
    }
  } else {
    auto run = tracking.GetRun((*link)->mlflow_run_id);
    if (run.ok() && run->info.status == "SCHEDULED") {
      tracking::RunUpdate update;
      update.status = "RUNNING";
      (void)tracking.UpdateRun((*link)->mlflow_run_id, update);
    }
    auto url = EnsureTrackingServer(air_home, env);
    tracking::ServerFiles files(air_home);
    auto info = tracking::ReadServerInfo(files, env);
    auto config_file = backends::LoadClusterConfig(air_home, "", env);
    if (url.ok() && info && config_file.ok()) {
      // Bound off loopback (for nodes on other machines): the address they can reach. The
      // token goes as a secret (MLFLOW_TRACKING_TOKEN, sent by the mlflow client as Bearer).
      uri = info->url;
      if (!tracking::IsLoopbackHost(info->host)) {
        uri =
            fmt::format("http://{}:{}", NodeHost(*info, config_file->tracking_server), info->port);
      }
      // Every request needs the token, loopback included.
      auto token = tracking::ServerToken(files, env);
      if (token.ok()) {
        out.secret_env.emplace_back("MLFLOW_TRACKING_TOKEN", *token);
      } else {
        uri.clear();
        out.warning = "tracking is off for this attempt: the server's token is unreadable";
      }
    } else {
      out.warning = "tracking is off for this attempt: " +
                    (url.ok() ? (config_file.ok() ? std::string("its server.json is unreadable")
                                                  : config_file.status().message())
                              : url.status().message());
    }
  }
  if (!uri.empty()) vars.emplace_back("MLFLOW_TRACKING_URI", uri);
  vars.emplace_back("MLFLOW_RUN_ID", (*link)->mlflow_run_id);
  vars.emplace_back("MLFLOW_EXPERIMENT_ID", (*link)->experiment_id);
  vars.emplace_back("MLFLOW_EXPERIMENT_NAME", (*link)->experiment_name);
  return out;
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

Result<std::optional<TrackingRunWriter>> TrackingRunWriter::Open(store::Store* store,
                                                                 int64_t run_id,
                                                                 const std::string& air_home,
                                                                 Env* env) {
  tracking::TrackingStore tracking(store->db(), env);
  AIR_ASSIGN_OR_RETURN(auto link, tracking.GetLink(run_id));
  if (!link) return std::optional<TrackingRunWriter>();
  TrackingRunWriter writer(store, env, *link);
  if (!link->tracking_uri.empty()) {
    AIR_ASSIGN_OR_RETURN(backends::ClusterConfig config,
                         backends::LoadClusterConfig(air_home, "", env));
    AIR_ASSIGN_OR_RETURN(
        ExternalTracking external,
        ResolveTrackingCredentials(config.tracking, link->tracking_uri, air_home, env));
    writer.rest_ =
        std::make_unique<tracking::MlflowRest>(link->tracking_uri, external.Credentials());
  }
  return std::optional<TrackingRunWriter>(std::move(writer));
}

Status TrackingRunWriter::LogBatch(const tracking::Batch& batch) {
  if (!rest_)
    return tracking::TrackingStore(store_->db(), env_).LogBatch(link_.mlflow_run_id, batch);
  nlohmann::json body = {{"run_id", link_.mlflow_run_id}};
  if (!batch.metrics.empty()) {
    nlohmann::json metrics = nlohmann::json::array();
    for (const auto& m : batch.metrics) {
      metrics.push_back(
          {{"key", m.key}, {"value", m.value}, {"timestamp", m.timestamp}, {"step", m.step}});
    }
    body["metrics"] = std::move(metrics);
  }
  if (!batch.tags.empty()) {
    nlohmann::json tags = nlohmann::json::array();
    for (const auto& tag : batch.tags) tags.push_back({{"key", tag.key}, {"value", tag.value}});
    body["tags"] = std::move(tags);
  }
  return rest_->Call("POST", "runs/log-batch", body).status();
}

Status TrackingRunWriter::EndRun(const std::string& status, int64_t end_ms) {
  if (!rest_) {
    tracking::RunUpdate update;
    update.status = status;
    update.end_time = end_ms;
    return tracking::TrackingStore(store_->db(), env_)
        .UpdateRun(link_.mlflow_run_id, update)
        .status();
  }
  return rest_
      ->Call("POST", "runs/update",
             {{"run_id", link_.mlflow_run_id}, {"status", status}, {"end_time", end_ms}})
      .status();
}

namespace {

// Sets `tags` on the run's MLflow run and, when `status` is set, ends it: in the store, or on
// the external server the run is tracked on. A run without a tracking link is left alone.
Status UpdateTrackingRun(store::Store* store, int64_t run_id,
                         const std::vector<tracking::KeyValue>& tags, const std::string& status,
                         int64_t end_ms, const std::string& air_home, Env* env) {
  AIR_ASSIGN_OR_RETURN(auto writer, TrackingRunWriter::Open(store, run_id, air_home, env));
  if (!writer) return Status::Ok();
  tracking::Batch batch;
  batch.tags = tags;
  AIR_RETURN_IF_ERROR(writer->LogBatch(batch));
  if (status.empty()) return Status::Ok();
  return writer->EndRun(status, end_ms);
}

}  // namespace

Status TagAttemptInTracking(store::Store* store, int64_t run_id, int attempt, int num_nodes,
                            const std::string& air_home, Env* env) {
  return UpdateTrackingRun(
      store, run_id,
      {{"air.attempt", std::to_string(attempt)},
       {"air.num_nodes", std::to_string(num_nodes)},
       {fmt::format("air.attempt.{}.num_nodes", attempt), std::to_string(num_nodes)}},
      "", 0, air_home, env);
}

Status FinishTrackingRun(store::Store* store, const store::RunRecord& run,
                         const std::string& air_home, Env* env) {
  std::string status = TrackingStatusFor(run.state);
  if (status.empty()) return Status::Ok();
  std::vector<tracking::KeyValue> tags = {{"air.state", store::RunStateName(run.state)},
                                          {"air.attempts", std::to_string(run.attempt_count)}};
  if (!run.failure_summary.empty()) {
    tags.push_back({"air.failure_summary", run.failure_summary.substr(0, 8000)});
  }
  const int64_t end_ms = run.ended_us.value_or(env->NowMicros()) / 1000;
  return UpdateTrackingRun(store, run.id, tags, status, end_ms, air_home, env);
}

}  // namespace air::runtime
