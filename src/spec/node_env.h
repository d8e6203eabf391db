// The per-node environment contract: exactly the variables a node's command receives
// (REFERENCES.md §1 and §2). The dry-run plan prints it and the runtime launches with it, so
// both go through BuildNodeEnvironment and can never disagree.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spec/workload_spec.h"

namespace air::spec {

// Shown in a dry run for values that only exist once a run is launched.
inline constexpr char kAssignedAtLaunch[] = "<assigned at launch>";
// The value every secret variable shows outside the node processes.
inline constexpr char kRedactedValue[] = "[REDACTED]";

// Values that only exist once a run is launched (or are shown as-is in a dry run).
struct LaunchContext {
  std::string run_id;  // AIR_RUN_ID
  int attempt = 0;     // AIR_ATTEMPT (0-based)
  std::string master_addr = "127.0.0.1";
  int master_port = 0;               // fresh per attempt
  std::string code_source_path;      // the node's materialized snapshot (CODE_SOURCE_PATH)
  std::string hyperparameters_path;  // set only when the spec has parameters
  std::string mlflow_run_id;         // one tracking run shared by all nodes
  std::string mlflow_experiment_name;
};

struct EnvVar {
  std::string name;
  std::string value;
  bool is_secret = false;  // value is a placeholder; the real one is injected at launch only
};

// The ordered environment of node `node_rank`: NUM_NODES, NODE_RANK, LOCAL_WORLD_SIZE,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT, CODE_SOURCE_PATH, HYPERPARAMETERS_PATH (only when the
// spec has parameters), MLFLOW_RUN_ID, MLFLOW_EXPERIMENT_NAME, AIR_RUN_ID, AIR_ATTEMPT,
// PYTHONUNBUFFERED=1, then env_variables, then secrets (is_secret, value "[REDACTED]").
// A master_port of 0 shows as kAssignedAtLaunch; an empty mlflow_experiment_name is taken
// from MlflowExperimentName(spec).
std::vector<EnvVar> BuildNodeEnvironment(const WorkloadSpec& spec, const LaunchContext& launch,
                                         int node_rank);

// The launch context of a dry run: every launch-time value is kAssignedAtLaunch, attempt 0.
LaunchContext DryRunLaunchContext();

// "<mlflow_experiment_directory>/<experiment_name>" when a directory is given, else the
// experiment name.
std::string MlflowExperimentName(const WorkloadSpec& spec);

// The names air sets itself (the list above plus CUDA_VISIBLE_DEVICES, which the local backend
// sets on GPU hosts); env_variables and secrets may not use them, nor any name starting with
// AIR_.
const std::vector<std::string>& ReservedEnvironmentNames();
bool IsReservedEnvironmentName(std::string_view name);

}  // namespace air::spec
