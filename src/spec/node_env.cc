// The per-node environment (see node_env.h).
#include "spec/node_env.h"

#include <algorithm>

namespace air::spec {

const std::vector<std::string>& ReservedEnvironmentNames() {
  static const std::vector<std::string> kReserved = {"NUM_NODES",        "NODE_RANK",
                                                     "LOCAL_WORLD_SIZE", "WORLD_SIZE",
                                                     "MASTER_ADDR",      "MASTER_PORT",
                                                     "CODE_SOURCE_PATH", "HYPERPARAMETERS_PATH",
                                                     "MLFLOW_RUN_ID",    "MLFLOW_EXPERIMENT_NAME",
                                                     "AIR_RUN_ID",       "AIR_ATTEMPT",
                                                     "PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES"};
  return kReserved;
}

bool IsReservedEnvironmentName(std::string_view name) {
  if (name.substr(0, 4) == "AIR_") return true;
  const auto& reserved = ReservedEnvironmentNames();
  return std::find(reserved.begin(), reserved.end(), name) != reserved.end();
}

std::string MlflowExperimentName(const WorkloadSpec& spec) {
  if (!spec.mlflow_experiment_directory || spec.mlflow_experiment_directory->empty()) {
    return spec.experiment_name;
  }
  std::string dir = *spec.mlflow_experiment_directory;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir == "/" ? "/" + spec.experiment_name : dir + "/" + spec.experiment_name;
}

LaunchContext DryRunLaunchContext() {
  LaunchContext launch;
  launch.run_id = kAssignedAtLaunch;
  launch.attempt = 0;
  launch.master_addr = kAssignedAtLaunch;
  launch.master_port = 0;
  launch.code_source_path = kAssignedAtLaunch;
  launch.hyperparameters_path = kAssignedAtLaunch;
  launch.mlflow_run_id = kAssignedAtLaunch;
  return launch;
}

std::vector<EnvVar> BuildNodeEnvironment(const WorkloadSpec& spec, const LaunchContext& launch,
                                         int node_rank) {
  std::vector<EnvVar> env;
  auto add = [&env](std::string name, std::string value) {
    env.push_back({std::move(name), std::move(value), false});
  };
  add("NUM_NODES", std::to_string(spec.compute.num_nodes));
  add("NODE_RANK", std::to_string(node_rank));
  add("LOCAL_WORLD_SIZE", std::to_string(spec.compute.per_node));
  add("WORLD_SIZE", std::to_string(spec.compute.num_accelerators));
  add("MASTER_ADDR", launch.master_addr);
  add("MASTER_PORT",
      launch.master_port > 0 ? std::to_string(launch.master_port) : std::string(kAssignedAtLaunch));
  add("CODE_SOURCE_PATH", launch.code_source_path);
  if (spec.parameters_yaml) add("HYPERPARAMETERS_PATH", launch.hyperparameters_path);
  add("MLFLOW_RUN_ID", launch.mlflow_run_id);
  add("MLFLOW_EXPERIMENT_NAME", launch.mlflow_experiment_name.empty()
                                    ? MlflowExperimentName(spec)
                                    : launch.mlflow_experiment_name);
  add("AIR_RUN_ID", launch.run_id);
  add("AIR_ATTEMPT", std::to_string(launch.attempt));
  add("PYTHONUNBUFFERED", "1");
  for (const auto& [name, value] : spec.env_variables) add(name, value);
  for (const auto& [name, ref] : spec.secrets) {
    env.push_back({name, kRedactedValue, true});
  }
  return env;
}

}  // namespace air::spec
