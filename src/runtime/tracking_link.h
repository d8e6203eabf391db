// The runtime's side of tracking (docs/tracking.md): every air run is an MLflow run.
//   - EnsureTrackingServer starts AIR_HOME's `air server` on demand (detached, shared by every
//     run and `air ui`) and returns its URL.
//   - CreateTrackingRun, at submit, records the run's MLflow experiment and run in the store
//     (tracking_* tables), with air's tags, and links it to the air run.
//   - PrepareTrackingForAttempt gives what a node gets: MLFLOW_TRACKING_URI, MLFLOW_RUN_ID,
//     MLFLOW_EXPERIMENT_ID, MLFLOW_EXPERIMENT_NAME.
//   - FinishTrackingRun sets the MLflow status from the air run's terminal state
//     (SUCCEEDED -> FINISHED; FAILED, TIMED_OUT, INTERNAL_ERROR -> FAILED; CANCELED -> KILLED).
// Thread safety: stateless functions over a caller-owned Store; EnsureTrackingServer forks.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "spec/workload_spec.h"
#include "store/store.h"

namespace air::runtime {

// The URL of AIR_HOME's running tracking server, starting it first when none answers.
Result<std::string> EnsureTrackingServer(const std::string& air_home, Env* env);

Status CreateTrackingRun(store::Store* store, const spec::WorkloadSpec& spec,
                         const store::RunRecord& run, Env* env);

// Called before each attempt: the MLFLOW_* variables of the run's nodes (empty when the run
// has no tracking run), and a SCHEDULED tracking run becomes RUNNING. Starts the server when it
// is not running; when it cannot start, nodes get no MLFLOW_TRACKING_URI and the reason is
// returned in `warning` (the run goes on).
std::vector<std::pair<std::string, std::string>> PrepareTrackingForAttempt(
    store::Store* store, const std::string& air_home, int64_t run_id, Env* env,
    std::string* warning);

// "FINISHED", "FAILED" or "KILLED" for a terminal air state; "" for a live one.
std::string TrackingStatusFor(store::RunState state);

// Sets the linked tracking run's status and end time from the air run's (terminal) state.
Status FinishTrackingRun(store::Store* store, const store::RunRecord& run, Env* env);

}  // namespace air::runtime
