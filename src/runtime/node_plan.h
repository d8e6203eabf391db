// Turning a run's spec into the launch of one attempt: each node's NodeLaunch (command, working
// directory, log and report paths, and the environment from spec::BuildNodeEnvironment — the
// same function the dry-run plan prints), with the secret values kept apart for the backend to
// inject into the node processes only.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cluster_backend.h"
#include "runtime/layout.h"
#include "runtime/volume_access.h"
#include "spec/workload_spec.h"
#include "store/store.h"

namespace air::runtime {

// What the supervisor prepared once per run, before the first attempt.
struct PreparedRun {
  std::vector<std::string> node_workdirs;  // per node: CODE_SOURCE_PATH and working directory
  std::string hyperparameters_path;        // "" when the spec has no parameters
  std::string python_bin_dir;              // "" without environment.dependencies
  VolumeAccess volumes;                    // how nodes reach /Volumes (runtime/volume_access.h)
  uint64_t log_max_bytes = 0;              // node log cap before rotation; 0: none
  int log_keep = 2;                        // rotated parts kept
  std::vector<std::pair<std::string, std::string>> secret_values;  // NAME -> value
};

struct AttemptSettings {
  int attempt = 0;
  int master_port = 0;
  int grace_seconds = 10;
  std::string inherited_path;  // the supervisor's PATH, for a dependency venv to go first
  std::string air_bin_dir;     // the directory of the air executable: last on a node's PATH
  std::string air_executable;  // its absolute path: AIR_BIN on each node
  // Set after the spec's variables (runtime/tracking_link.h: MLFLOW_TRACKING_URI, ...).
  std::vector<std::pair<std::string, std::string>> tracking_env;
  // An external tracking server's credentials (MLFLOW_TRACKING_TOKEN, ...): injected like the
  // spec's secrets (never in a launch file, redacted in logs); the spec's own variables win. Also
  // air's own server's token when it is bound off loopback (runtime/tracking_link.h).
  std::vector<std::pair<std::string, std::string>> tracking_secret_env;
};

backends::AttemptToLaunch PlanAttempt(const spec::WorkloadSpec& spec, const store::RunRecord& run,
                                      const Layout& layout, const PreparedRun& prepared,
                                      const AttemptSettings& settings);

}  // namespace air::runtime
