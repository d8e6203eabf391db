// Per-node launch descriptions for one attempt.
#include "runtime/node_plan.h"

#include <algorithm>
#include <set>

#include "spec/node_env.h"

namespace air::runtime {

backends::AttemptToLaunch PlanAttempt(const spec::WorkloadSpec& run_spec,
                                      const store::RunRecord& run, const Layout& layout,
                                      const PreparedRun& prepared,
                                      const AttemptSettings& settings) {
  // The command and env_variables as the nodes get them (/Volumes paths rewritten where no
  // mount can show them).
  const spec::WorkloadSpec spec = SpecForNodes(run_spec, prepared.volumes);
  backends::AttemptToLaunch out;
  out.run_id = run.id;
  out.attempt = settings.attempt;
  out.gpus_per_node = spec.compute.kind == spec::AcceleratorKind::kGpu ? spec.compute.per_node : 0;
  out.cpus_per_node = spec.compute.kind == spec::AcceleratorKind::kGpu ? 0 : spec.compute.per_node;
  out.attempt_dir = layout.AttemptDir(run.id, settings.attempt);
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
    launch.tracker_path = layout.NodeTrackerFile(run.id, settings.attempt, rank);
    launch.grace_seconds = settings.grace_seconds;
    if (prepared.volumes.kind == VolumeAccessKind::kMount) {
      launch.volumes_root = prepared.volumes.root;
      launch.volumes_required = prepared.volumes.required;
    }
    launch.log_max_bytes = prepared.log_max_bytes;
    launch.log_keep = prepared.log_keep;
    launch.system_metrics_interval_s = spec.system_metrics_interval_s;
    launch.metrics_path = layout.NodeMetricsFile(run.id, settings.attempt, rank);
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
      for (const auto& [name, value] : settings.tracking_secret_env) {
        bool spec_sets_it =
            secret_names.count(name) != 0 ||
            std::any_of(spec.env_variables.begin(), spec.env_variables.end(),
                        [&name = name](const auto& var) { return var.first == name; });
        if (spec_sets_it) continue;
        launch.secret_names.push_back(name);
        node.secret_env.emplace_back(name, value);
      }
    }
    // PATH: the run's environment first (when it has one), then the submitter's PATH, then
    // air's own directory last, so `air train` works but air's directory never shadows the
    // user's python3 or torchrun. AIR_BIN names air itself.
    std::string path = settings.inherited_path;
    if (!settings.air_bin_dir.empty()) {
      path = path.empty() ? settings.air_bin_dir : path + ":" + settings.air_bin_dir;
    }
    if (!prepared.python_bin_dir.empty()) {
      std::string venv = prepared.python_bin_dir.substr(0, prepared.python_bin_dir.rfind('/'));
      launch.env.emplace_back("VIRTUAL_ENV", venv);
      path = path.empty() ? prepared.python_bin_dir : prepared.python_bin_dir + ":" + path;
    }
    if (!path.empty()) launch.env.emplace_back("PATH", path);
    if (!settings.air_executable.empty())
      launch.env.emplace_back("AIR_BIN", settings.air_executable);
    // The real volume root, valid on the node whichever way /Volumes is provided (and what
    // `air volumes` reads there).
    if (!prepared.volumes.root.empty())
      launch.env.emplace_back("AIR_VOLUMES_ROOT", prepared.volumes.root);
    for (const auto& [name, value] : prepared.secret_values) {
      if (secret_names.count(name) != 0) node.secret_env.emplace_back(name, value);
    }
    node.launch_path = layout.NodeLaunchFile(run.id, settings.attempt, rank);
    out.nodes.push_back(std::move(node));
  }
  return out;
}

}  // namespace air::runtime
