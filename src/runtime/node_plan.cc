// Per-node launch descriptions for one attempt.
#include "runtime/node_plan.h"

#include <algorithm>
#include <set>

#include "spec/node_env.h"

namespace air::runtime {

backends::AttemptToLaunch PlanAttempt(const spec::WorkloadSpec& spec, const store::RunRecord& run,
                                      const Layout& layout, const PreparedRun& prepared,
                                      const AttemptSettings& settings) {
  backends::AttemptToLaunch out;
  out.run_id = run.id;
  out.attempt = settings.attempt;
  out.gpus_per_node = spec.compute.kind == spec::AcceleratorKind::kGpu ? spec.compute.per_node : 0;
  std::set<std::string> secret_names;
  for (const auto& [name, value] : prepared.secret_values) secret_names.insert(name);
  for (int rank = 0; rank < spec.compute.num_nodes; ++rank) {
    spec::LaunchContext context;
    context.run_id = std::to_string(run.id);
    context.attempt = settings.attempt;
    context.master_addr = "127.0.0.1";
    context.master_port = settings.master_port;
    context.code_source_path = prepared.node_workdirs[rank];
    context.hyperparameters_path = prepared.hyperparameters_path;
    context.mlflow_run_id = run.mlflow_run_id;
    backends::NodeToLaunch node;
    agent::NodeLaunch& launch = node.launch;
    launch.run_id = run.id;
    launch.attempt = settings.attempt;
    launch.node_rank = rank;
    launch.command = spec.command;
    launch.workdir = prepared.node_workdirs[rank];
    launch.log_path = layout.NodeLog(run.id, settings.attempt, rank);
    launch.started_path = layout.NodeStartedFile(run.id, settings.attempt, rank);
    launch.exit_path = layout.NodeExitFile(run.id, settings.attempt, rank);
    launch.grace_seconds = settings.grace_seconds;
    for (const spec::EnvVar& var : spec::BuildNodeEnvironment(spec, context, rank)) {
      if (var.is_secret) {
        launch.secret_names.push_back(var.name);  // the value travels in secret_env only
      } else {
        launch.env.emplace_back(var.name, var.value);
      }
    }
    // A spec that names its own tracking server keeps it.
    bool own_tracking =
        std::any_of(spec.env_variables.begin(), spec.env_variables.end(),
                    [](const auto& var) { return var.first == "MLFLOW_TRACKING_URI"; });
    if (!own_tracking) {
      for (const auto& var : settings.tracking_env) launch.env.push_back(var);
    }
    // PATH: the dependency venv first (when there is one), then air's own directory (so a
    // node's command can call `air train` without Python), then the submitter's PATH.
    std::string path = settings.inherited_path;
    if (!settings.air_bin_dir.empty()) {
      path = path.empty() ? settings.air_bin_dir : settings.air_bin_dir + ":" + path;
    }
    if (!prepared.python_bin_dir.empty()) {
      std::string venv = prepared.python_bin_dir.substr(0, prepared.python_bin_dir.rfind('/'));
      launch.env.emplace_back("VIRTUAL_ENV", venv);
      path = prepared.python_bin_dir + ":" + path;
    }
    if (!path.empty()) launch.env.emplace_back("PATH", path);
    for (const auto& [name, value] : prepared.secret_values) {
      if (secret_names.count(name) != 0) node.secret_env.emplace_back(name, value);
    }
    node.launch_path = layout.NodeLaunchFile(run.id, settings.attempt, rank);
    out.nodes.push_back(std::move(node));
  }
  return out;
}

}  // namespace air::runtime
