// The runtime's side of tracking (docs/tracking.md): every air run is an MLflow run.
//   - EnsureTrackingServer starts AIR_HOME's `air server` on demand (detached, shared by every
//     run and `air ui`, runtime/ui_login.h) and returns its URL.
//   - CheckExternalTracking, at submit before anything is written, finds the external MLflow
//     server (MLFLOW_TRACKING_URI, else config.yaml's tracking_uri) and checks that it answers
//     air's credentials (air secrets named in config.yaml).
//   - CreateTrackingRun, at submit, records the run's MLflow experiment and run in the store
//     (tracking_* tables) or on the external server, with air's tags, and links it to the run.
//   - PrepareTrackingForAttempt gives what a node gets: MLFLOW_TRACKING_URI, MLFLOW_RUN_ID,
//     MLFLOW_EXPERIMENT_ID, MLFLOW_EXPERIMENT_NAME, and an external server's credentials as
//     secret variables (MLFLOW_TRACKING_TOKEN or _USERNAME/_PASSWORD: injected and redacted).
//   - TagAttemptInTracking tags the MLflow run with each attempt's size when it starts
//     (air.attempt, air.num_nodes, air.attempt.<k>.num_nodes: elastic attempts shrink).
//   - FinishTrackingRun sets the MLflow status from the air run's terminal state
//     (SUCCEEDED -> FINISHED; FAILED, TIMED_OUT, INTERNAL_ERROR -> FAILED; CANCELED -> KILLED),
//     whoever ends the run (the supervisor, or reconcile after the supervisor died).
// Thread safety: stateless functions over a caller-owned Store; EnsureTrackingServer forks.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cluster_registry.h"
#include "base/env.h"
#include "base/status.h"
#include "spec/workload_spec.h"
#include "store/store.h"
#include "tracking/http_client.h"
#include "tracking/tracking_store.h"

namespace air::runtime {

// The URL of AIR_HOME's running tracking server, starting it first when none answers (or
// restarting it when it runs with other settings than config.yaml's tracking_server).
Result<std::string> EnsureTrackingServer(const std::string& air_home, Env* env);

// The external MLflow server a run is tracked on, and air's credentials for it.
struct ExternalTracking {
  std::string uri;       // "" : air's own server
  std::string named_by;  // "MLFLOW_TRACKING_URI=<uri>" or "<config.yaml>: tracking_uri <uri>"
  // (MLFLOW_TRACKING_TOKEN | _USERNAME, _PASSWORD) -> value, from the air secrets config.yaml
  // names; what the nodes get (as secrets) and what air's own requests send.
  std::vector<std::pair<std::string, std::string>> secret_env;
  std::string secrets_named;  // "tracking_token_secret mlflow/token" for messages, or ""
  tracking::Credentials Credentials() const;
};

// Air's credentials for an external server, from the air secrets `config` names (none named:
// none). `uri` is the server (for messages). Errors name the config file, the key and the
// secret (never a value).
Result<ExternalTracking> ResolveTrackingCredentials(const backends::TrackingConfig& config,
                                                    const std::string& uri,
                                                    const std::string& air_home, Env* env);

// At submit, before anything is written: the external server of this submit (uri "" for
// air's own) with its credentials, after checking that it answers them (an experiments call).
// An unreachable server or refused credentials are clear errors naming the server and the
// secret.
Result<ExternalTracking> CheckExternalTracking(const backends::TrackingConfig& config,
                                               const std::string& air_home, Env* env);

Status CreateTrackingRun(store::Store* store, const spec::WorkloadSpec& spec,
                         const store::RunRecord& run, const ExternalTracking& external, Env* env);

// What one attempt's nodes get for tracking.
struct AttemptTracking {
  std::vector<std::pair<std::string, std::string>> env;         // MLFLOW_TRACKING_URI, ...
  std::vector<std::pair<std::string, std::string>> secret_env;  // an external server's credentials
  std::string warning;  // why tracking is off (or has no credentials) for this attempt
};

// Called before each attempt: the MLFLOW_* variables of the run's nodes (empty when the run
// has no tracking run), and a SCHEDULED tracking run becomes RUNNING. Starts the server when it
// is not running (with config.yaml's tracking_server settings); when it cannot start, nodes get
// no MLFLOW_TRACKING_URI and the reason is returned in `warning` (the run goes on). Air's own
// server bound off loopback is given to nodes by the address they can reach (advertise_host, or
// this machine's name). Its token lands in `secret_env` (MLFLOW_TRACKING_TOKEN), which nodes
// get like any secret (injected, redacted, never in argv or launch files).
AttemptTracking PrepareTrackingForAttempt(store::Store* store, const std::string& air_home,
                                          int64_t run_id, const backends::TrackingConfig& config,
                                          Env* env);

// Writes into the MLflow run linked to an air run: in air's store (air's own server), or on the
// external server it is tracked on, with air's credentials from config.yaml (resolved once, at
// Open). Used for air's tags, the run's end, and the nodes' system metrics.
class TrackingRunWriter {
 public:
  // nullopt when the run has no tracking run.
  static Result<std::optional<TrackingRunWriter>> Open(store::Store* store, int64_t run_id,
                                                       const std::string& air_home, Env* env);
  // One runs/log-batch (MLflow's limits apply: at most 1000 metrics).
  Status LogBatch(const tracking::Batch& batch);
  // Sets the run's status and end time.
  Status EndRun(const std::string& status, int64_t end_ms);
  const tracking::RunLink& link() const { return link_; }

 private:
  TrackingRunWriter(store::Store* store, Env* env, tracking::RunLink link)
      : store_(store), env_(env), link_(std::move(link)) {}

  store::Store* store_;
  Env* env_;
  tracking::RunLink link_;
  std::unique_ptr<tracking::MlflowRest> rest_;  // an external server's; null for air's own
};

// "FINISHED", "FAILED" or "KILLED" for a terminal air state; "" for a live one.
std::string TrackingStatusFor(store::RunState state);

// Tags the linked tracking run with the size of `attempt` as it starts: air.attempt,
// air.num_nodes (the latest attempt's) and air.attempt.<attempt>.num_nodes.
Status TagAttemptInTracking(store::Store* store, int64_t run_id, int attempt, int num_nodes,
                            const std::string& air_home, Env* env);

// Sets the linked tracking run's status, end time and air's end tags (air.state, air.attempts,
// air.failure_summary) from the air run's (terminal) state, in air's store or on the external
// server (with the credentials AIR_HOME/config.yaml names).
Status FinishTrackingRun(store::Store* store, const store::RunRecord& run,
                         const std::string& air_home, Env* env);

}  // namespace air::runtime
