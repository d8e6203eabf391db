// Rendering the dry-run plan (see plan.h).
#include "spec/plan.h"

#include <fmt/format.h>

#include "base/strings.h"
#include "spec/compute_shapes.h"
#include "spec/node_env.h"

namespace air::spec {
namespace {

// Each line of `text` prefixed with `pad` (empty lines stay empty), ending in a newline.
std::string Indent(std::string_view text, std::string_view pad) {
  std::vector<std::string> lines = Split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::string out;
  for (const auto& line : lines) out += line.empty() ? "\n" : std::string(pad) + line + "\n";
  return out;
}

std::string EnvLine(const EnvVar& var, const WorkloadSpec& spec) {
  if (!var.is_secret) return fmt::format("{}={}", var.name, var.value);
  for (const auto& [name, ref] : spec.secrets) {
    if (name == var.name) {
      return fmt::format("{}={}  (secret {}, resolved at launch)", var.name, var.value,
                         ref.ToString());
    }
  }
  return fmt::format("{}={}", var.name, var.value);
}

std::string SnapshotSummary(const WorkloadSpec& spec, const SnapshotListing* listing) {
  const SnapshotSpec& snap = spec.code_source->snapshot;
  std::string where = snap.resolved_root;
  if (snap.git) {
    where += snap.git->branch ? fmt::format(" at branch {}", *snap.git->branch)
                              : fmt::format(" at commit {}", *snap.git->commit);
    if (listing && !listing->revision.empty()) {
      where += fmt::format(" ({})", listing->revision.substr(0, 12));
    }
  } else {
    where += " (working tree, .gitignore honored)";
  }
  if (!snap.include_paths.empty()) where += ", only " + Join(snap.include_paths, ", ");
  if (!listing) return where;
  return fmt::format("{}: {} file{}, {}", where, listing->files.size(),
                     listing->files.size() == 1 ? "" : "s", HumanBytes(listing->total_bytes));
}

}  // namespace

std::string OverrideChangesText(const std::vector<OverrideChange>& changes) {
  std::string out;
  for (const auto& c : changes) {
    out += fmt::format("override {}: {} -> {}\n", c.field, c.before, c.after);
  }
  return out;
}

nlohmann::ordered_json PlanToJson(const PlanInput& input) {
  const WorkloadSpec& spec = *input.spec;
  using json = nlohmann::ordered_json;
  json plan;
  plan["dry_run"] = true;
  plan["file"] = spec.source_path;
  plan["experiment_name"] = spec.experiment_name;
  const ComputeSpec& c = spec.compute;
  plan["compute"] = {{"accelerator_type", c.accelerator_type},
                     {"num_accelerators", c.num_accelerators},
                     {"kind", c.kind == AcceleratorKind::kGpu ? "gpu" : "cpu"},
                     {"device_model", c.device_model},
                     {"per_node", c.per_node},
                     {"num_nodes", c.num_nodes},
                     {"min_nodes", c.min_nodes},
                     {"description", DescribeCompute(c)}};
  if (spec.environment) {
    const EnvironmentSpec& e = *spec.environment;
    json env = json::object();
    if (e.version) env["version"] = *e.version;
    if (!e.dependencies.empty()) env["dependencies"] = e.dependencies;
    if (e.requirements_file) env["requirements_file"] = *e.requirements_file;
    if (e.docker_image) {
      env["docker_image"] = {{"url", e.docker_image->url}};
      if (e.docker_image->username) env["docker_image"]["username"] = *e.docker_image->username;
      if (e.docker_image->password_secret) {
        env["docker_image"]["password_secret"] = *e.docker_image->password_secret;
      }
    }
    plan["environment"] = env;
  } else {
    plan["environment"] = nullptr;
  }
  if (spec.code_source) {
    const SnapshotSpec& s = spec.code_source->snapshot;
    json code = {{"type", spec.code_source->type},
                 {"root_path", s.root_path},
                 {"resolved_root", s.resolved_root},
                 {"include_paths", s.include_paths}};
    if (s.git) {
      code["git"] =
          s.git->branch ? json{{"branch", *s.git->branch}} : json{{"commit", *s.git->commit}};
    }
    if (input.snapshot) {
      code["revision"] =
          input.snapshot->revision.empty() ? json(nullptr) : json(input.snapshot->revision);
      code["files"] = input.snapshot->files.size();
      code["bytes"] = input.snapshot->total_bytes;
    }
    plan["code_source"] = code;
  } else {
    plan["code_source"] = nullptr;
  }
  if (input.volumes) {
    plan["volumes"] = {{"access", input.volumes->access},
                       {"root", input.volumes->root},
                       {"detail", input.volumes->detail}};
  }
  plan["command"] = spec.command;
  LaunchContext launch = DryRunLaunchContext();
  json nodes = json::array();
  for (int rank = 0; rank < c.num_nodes; ++rank) {
    json env = json::array();  // a list: the order is part of the contract
    for (const EnvVar& var : BuildNodeEnvironment(spec, launch, rank)) {
      env.push_back({{"name", var.name}, {"value", var.value}, {"secret", var.is_secret}});
    }
    nodes.push_back({{"node_rank", rank}, {"env", env}});
  }
  plan["nodes"] = nodes;
  json secrets = json::array();
  for (const auto& [name, ref] : spec.secrets)
    secrets.push_back({{"name", name}, {"ref", ref.ToString()}});
  plan["secrets"] = secrets;
  plan["max_retries"] = spec.max_retries;
  plan["max_attempts"] = spec.max_retries + 1;
  plan["timeout_minutes"] = spec.timeout_minutes ? json(*spec.timeout_minutes) : json(nullptr);
  plan["system_metrics_interval_s"] = spec.system_metrics_interval_s;
  plan["hang_timeout_minutes"] =
      spec.hang_timeout_minutes ? json(*spec.hang_timeout_minutes) : json(nullptr);
  plan["on_hang"] = spec.hang_timeout_minutes ? json(OnHangName(spec.on_hang)) : json(nullptr);
  plan["parameters_yaml"] = spec.parameters_yaml ? json(*spec.parameters_yaml) : json(nullptr);
  plan["idempotency_token"] =
      spec.idempotency_token ? json(*spec.idempotency_token) : json(nullptr);
  plan["mlflow_run_name"] = spec.mlflow_run_name ? json(*spec.mlflow_run_name) : json(nullptr);
  plan["mlflow_experiment_name"] = MlflowExperimentName(spec);
  json permissions = json::array();
  for (const auto& p : spec.permissions) {
    permissions.push_back({{p.principal_kind, p.principal}, {"level", p.level}});
  }
  plan["permissions"] = permissions;
  json overrides = json::array();
  if (input.changes) {
    for (const auto& ch : *input.changes) {
      overrides.push_back({{"field", ch.field}, {"before", ch.before}, {"after", ch.after}});
    }
  }
  plan["overrides"] = overrides;
  return plan;
}

std::string PlanToText(const PlanInput& input) {
  const WorkloadSpec& spec = *input.spec;
  const ComputeSpec& c = spec.compute;
  std::string out = fmt::format("plan for {}\n", spec.source_path);
  auto row = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<13}{}\n", label, value);
  };
  row("experiment", spec.experiment_name);
  bool one = c.num_accelerators == 1;
  row("compute",
      fmt::format("{}; {} {} in all", DescribeCompute(c), c.num_accelerators,
                  c.kind == AcceleratorKind::kGpu ? (one ? "GPU" : "GPUs")
                                                  : (one ? "worker process" : "worker processes")));
  if (c.min_nodes < c.num_nodes) {
    row("elastic", fmt::format("a lost node is dropped: attempts continue on {} to {} nodes",
                               c.min_nodes, c.num_nodes));
  }
  if (spec.environment) {
    const EnvironmentSpec& e = *spec.environment;
    if (e.docker_image) {
      row("environment", "docker image " + e.docker_image->url);
    } else if (e.requirements_file) {
      row("environment", "pip install -r " + *e.requirements_file);
    } else {
      row("environment",
          fmt::format("{}{} dependencies: {}", e.version ? "version " + *e.version + "; " : "",
                      e.dependencies.size(), Join(e.dependencies, ", ")));
    }
  } else {
    row("environment", "the node's default environment");
  }
  row("code source",
      spec.code_source ? "snapshot of " + SnapshotSummary(spec, input.snapshot) : "none");
  if (input.volumes) row("volumes", input.volumes->detail);
  row("retries",
      fmt::format("{} (at most {} attempt{}; a retry restarts every node)", spec.max_retries,
                  spec.max_retries + 1, spec.max_retries == 0 ? "" : "s"));
  row("timeout", spec.timeout_minutes ? fmt::format("{} minutes per attempt", *spec.timeout_minutes)
                                      : std::string("none"));
  row("sampling",
      spec.system_metrics_interval_s == 0
          ? std::string("system metrics off")
          : fmt::format("system metrics every {} s per node", spec.system_metrics_interval_s));
  if (spec.hang_timeout_minutes) {
    row("hang",
        fmt::format("no output or metric from any node for {} minutes: {}",
                    *spec.hang_timeout_minutes,
                    spec.on_hang == OnHang::kRestart ? "restart (a retry)" : "fail the run"));
  }
  row("mlflow", fmt::format("experiment {}{}", MlflowExperimentName(spec),
                            spec.mlflow_run_name ? ", run " + *spec.mlflow_run_name : ""));
  if (spec.idempotency_token) row("idempotency", *spec.idempotency_token);
  for (const auto& p : spec.permissions) {
    row("permission", fmt::format("{} {} {}", p.principal_kind, p.principal, p.level));
  }

  LaunchContext launch = DryRunLaunchContext();
  std::vector<EnvVar> first = BuildNodeEnvironment(spec, launch, 0);
  out += fmt::format("\nenvironment of node 0 (of {}):\n", c.num_nodes);
  for (const EnvVar& var : first) out += "  " + EnvLine(var, spec) + "\n";
  std::vector<std::string> other_nodes;
  bool only_rank_differs = true;
  for (int rank = 1; rank < c.num_nodes; ++rank) {
    std::vector<std::string> diffs;
    std::vector<EnvVar> env = BuildNodeEnvironment(spec, launch, rank);
    for (size_t i = 0; i < env.size(); ++i) {
      if (i >= first.size() || env[i].name != first[i].name || env[i].value != first[i].value) {
        diffs.push_back(EnvLine(env[i], spec));
        only_rank_differs &= env[i].name == "NODE_RANK";
      }
    }
    other_nodes.push_back(
        fmt::format("environment of node {}: the same except {}\n", rank, Join(diffs, ", ")));
  }
  if (c.num_nodes > 3 && only_rank_differs) {
    out += fmt::format("environment of nodes 1 to {}: the same except NODE_RANK=1 to {}\n",
                       c.num_nodes - 1, c.num_nodes - 1);
  } else {
    for (const auto& line : other_nodes) out += line;
  }
  size_t command_lines = CountCommandLines(spec.command);
  out += fmt::format("\ncommand (bash -c on every node, {} line{}):\n", command_lines,
                     command_lines == 1 ? "" : "s");
  out += Indent(spec.command, "  ");
  if (spec.parameters_yaml) {
    out += "\nparameters (the file at HYPERPARAMETERS_PATH):\n";
    out += Indent(*spec.parameters_yaml, "  ");
  }
  out += "\ndry run: nothing was started\n";
  return out;
}

}  // namespace air::spec
