// The validator's top level and its sections experiment_name, compute, environment, command
// and the scalar settings (see validator.h, docs/workload-spec.md); code_source has its own file.
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "base/strings.h"
#include "spec/base_environments.h"
#include "spec/compute_shapes.h"
#include "spec/exec_limits.h"
#include "spec/scalar_types.h"
#include "spec/validator.h"

namespace air::spec {
namespace {

// The keys a workload may have at its top level.
const std::vector<std::string>& TopLevelKeys() {
  static const std::vector<std::string> kKeys = {"experiment_name",
                                                 "compute",
                                                 "environment",
                                                 "code_source",
                                                 "command",
                                                 "env_variables",
                                                 "secrets",
                                                 "max_retries",
                                                 "timeout_minutes",
                                                 "hang_timeout_minutes",
                                                 "on_hang",
                                                 "parameters",
                                                 "idempotency_token",
                                                 "mlflow_run_name",
                                                 "mlflow_experiment_directory",
                                                 "permissions",
                                                 "system_metrics_interval_s"};
  return kKeys;
}

constexpr int kMaxExperimentNameLength = 100;
constexpr int kMaxCommandLines = 1000;
constexpr int64_t kMaxRetries = 1000;
constexpr int64_t kMaxTimeoutMinutes = 525600;  // 365 days
constexpr int64_t kMaxSystemMetricsIntervalS = 3600;
constexpr size_t kMaxIdempotencyTokenChars = 64;
constexpr size_t kMaxRunNameChars = 250;

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

void SpecValidator::Validate(const YamlNode& root, WorkloadSpec* spec) {
  MappingView top;
  if (!CheckMapping(root, "", TopLevelKeys(),
                    "workload keys (experiment_name, compute, command, ...)", &top)) {
    return;
  }
  if (Require(top, root, "", "experiment_name", "name the experiment, e.g. 'my-sft'")) {
    ValidateExperimentName(*top.Get("experiment_name"), spec);
  }
  if (Require(top, root, "", "compute",
              "e.g. compute: {accelerator_type: GPU_8xH100, num_accelerators: 16}")) {
    ValidateCompute(*top.Get("compute"), spec);
  }
  if (const YamlNode* node = top.Get("environment")) ValidateEnvironment(*node, spec);
  if (const YamlNode* node = top.Get("code_source")) ValidateCodeSource(*node, spec);
  if (Require(top, root, "", "command", "give the shell command to run on every node")) {
    ValidateCommand(*top.Get("command"), spec);
  }
  if (const YamlNode* node = top.Get("env_variables")) ValidateEnvVariables(*node, spec);
  if (const YamlNode* node = top.Get("secrets")) ValidateSecrets(*node, top, spec);
  if (const YamlNode* node = top.Get("parameters")) ValidateParameters(*node, spec);
  if (const YamlNode* node = top.Get("permissions")) ValidatePermissions(*node, spec);
  ValidateScalarFields(top, spec);
  ValidateHangFields(top, spec);
  // Sizes the kernel would refuse at exec on every node (spec/exec_limits.h).
  for (const ExecLimitProblem& problem : CheckExecLimits(*spec, ExecLimitsOfThisProcess())) {
    diagnostics_->Add(spec->LocationOf(problem.field), problem.field, problem.message,
                      spec->OriginOf(problem.field));
  }
}

void SpecValidator::ValidateExperimentName(const YamlNode& node, WorkloadSpec* spec) {
  std::string name;
  if (!ReadString(node, "experiment_name", &name)) return;
  Remember("experiment_name", node, spec);
  auto bad = std::find_if(name.begin(), name.end(), [](char c) {
    return !(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_');
  });
  if (bad != name.end()) {
    Error(node, "experiment_name",
          fmt::format("'{}' contains '{}'; use only letters, digits, '-' and '_'", name,
                      CharacterAt(name, static_cast<size_t>(bad - name.begin()))));
  } else if (name.size() > static_cast<size_t>(kMaxExperimentNameLength)) {
    Error(node, "experiment_name",
          fmt::format("is {} characters long; at most {} are allowed", name.size(),
                      kMaxExperimentNameLength));
  }
  spec->experiment_name = name;
}

void SpecValidator::ValidateCompute(const YamlNode& node, WorkloadSpec* spec) {
  MappingView view;
  if (!CheckMapping(node, "compute", {"accelerator_type", "num_accelerators", "min_nodes"},
                    "accelerator_type, num_accelerators and min_nodes", &view)) {
    return;
  }
  ComputeSpec& compute = spec->compute;
  std::optional<NodeShape> shape;
  if (Require(view, node, "compute", "accelerator_type",
              "a node shape such as GPU_8xH100 or CPU_2")) {
    const YamlNode& type_node = *view.Get("accelerator_type");
    if (ReadString(type_node, "compute.accelerator_type", &compute.accelerator_type)) {
      Remember("compute.accelerator_type", type_node, spec);
      shape = LookupNodeShape(compute.accelerator_type);
      if (!shape) {
        std::vector<std::string> known = KnownGpuShapes();
        std::string message =
            fmt::format("unknown accelerator type '{}'", compute.accelerator_type);
        std::string suggestion = ShapeWithCorrectCase(compute.accelerator_type);
        if (suggestion.empty()) suggestion = ClosestMatch(compute.accelerator_type, known);
        if (!suggestion.empty()) message += fmt::format(" (did you mean '{}'?)", suggestion);
        message += fmt::format("; valid: {}, or CPU_<n> for n worker processes per node (1 to {})",
                               Join(known, ", "), kMaxCpuWorkersPerNode);
        Error(type_node, "compute.accelerator_type", std::move(message));
      }
    }
  }
  if (!Require(view, node, "compute", "num_accelerators",
               "the total number of GPUs (or CPU workers) across all nodes")) {
    return;
  }
  const YamlNode& count_node = *view.Get("num_accelerators");
  int64_t count = 0;
  if (!ReadInt(count_node, "compute.num_accelerators", &count)) return;
  Remember("compute.num_accelerators", count_node, spec);
  if (count <= 0) {
    Error(count_node, "compute.num_accelerators", fmt::format("must be at least 1, got {}", count));
    return;
  }
  if (!shape) return;
  int per = shape->per_node;
  if (count % per != 0) {
    int64_t lower = count / per * per;
    std::string options =
        lower > 0 ? fmt::format("{} or {}", lower, lower + per) : fmt::format("{}", per);
    Error(count_node, "compute.num_accelerators",
          fmt::format("{} is not a multiple of {}, the {} per node of {}; use {}", count, per,
                      shape->kind == AcceleratorKind::kGpu ? "GPUs" : "worker processes",
                      compute.accelerator_type, options));
    return;
  }
  if (count / per > kMaxNodes) {
    Error(count_node, "compute.num_accelerators",
          fmt::format("asks for {} nodes; at most {} are supported", count / per, kMaxNodes));
    return;
  }
  compute.num_accelerators = static_cast<int>(count);
  compute.kind = shape->kind;
  compute.device_model = shape->device_model;
  compute.per_node = per;
  compute.num_nodes = static_cast<int>(count / per);
  compute.min_nodes = compute.num_nodes;
  if (const YamlNode* min_node = view.Get("min_nodes")) {
    int64_t min_nodes = 0;
    if (!ReadInt(*min_node, "compute.min_nodes", &min_nodes)) return;
    Remember("compute.min_nodes", *min_node, spec);
    if (min_nodes < 1 || min_nodes > compute.num_nodes) {
      Error(*min_node, "compute.min_nodes",
            fmt::format("must be between 1 and the node count {} ({} / {} per node), got {}",
                        compute.num_nodes, count, per, min_nodes));
      return;
    }
    compute.min_nodes = static_cast<int>(min_nodes);
  }
}

void SpecValidator::ValidateEnvironment(const YamlNode& node, WorkloadSpec* spec) {
  MappingView view;
  if (!CheckMapping(node, "environment", {"version", "dependencies", "docker_image"},
                    "version, dependencies or docker_image", &view)) {
    return;
  }
  EnvironmentSpec env;
  const YamlNode* version = view.Get("version");
  const YamlNode* deps = view.Get("dependencies");
  const YamlNode* image = view.Get("docker_image");
  if (image) {
    for (const char* other : {"dependencies", "version"}) {
      if (const YamlNode* key = view.KeyNode(other)) {
        Error(*key, JoinField("environment", other),
              fmt::format("cannot be combined with docker_image (line {}): the image brings its "
                          "own environment; remove one of them",
                          view.KeyNode("docker_image")->location.line));
      }
    }
    DockerImageSpec docker;
    ValidateDockerImage(*image, "environment.docker_image", &docker, spec);
    env.docker_image = docker;
  }
  if (deps) {
    const std::string field = "environment.dependencies";
    Remember(field, *deps, spec);
    if (deps->IsSequence()) {
      if (deps->items.empty()) {
        Error(*deps, field, "is an empty list; list pip requirements or remove the key");
      }
      for (size_t i = 0; i < deps->items.size(); ++i) {
        const YamlNode& item = deps->items[i];
        std::string item_field = fmt::format("{}[{}]", field, i);
        if (item.IsMapping() && item.entries.size() == 1 && item.entries[0].first.IsScalar()) {
          Error(item, item_field,
                fmt::format("expected a pip requirement string, got a mapping; a ': ' makes "
                            "YAML read a key, write e.g. '{}=={}'",
                            item.entries[0].first.value, item.entries[0].second.value));
          continue;
        }
        std::string requirement;
        if (!ReadString(item, item_field, &requirement)) continue;
        if (requirement.find('\n') != std::string::npos) {
          Error(item, item_field, "a requirement must be one line");
          continue;
        }
        env.dependencies.push_back(requirement);
      }
    } else if (deps->IsScalar() && !deps->IsNull()) {
      std::string path;
      if (ReadString(*deps, field, &path)) {
        std::string resolved = ResolveAgainst(spec->source_dir, path);
        if (!env_->FileExists(resolved) || env_->IsDirectory(resolved)) {
          Error(*deps, field,
                fmt::format("requirements file '{}' does not exist (resolved to {}); give a "
                            "list of requirements or an existing file",
                            path, resolved));
        }
        env.requirements_file = resolved;
      }
    } else {
      Error(*deps, field,
            "expected a list of pip requirements or the path of a requirements file, got " +
                DescribeNode(*deps));
    }
  }
  if (version) {
    const std::string field = "environment.version";
    ScalarType type = ResolveScalarType(*version);
    if (!version->IsScalar() || (type != ScalarType::kString && type != ScalarType::kInt)) {
      Error(*version, field,
            "expected a version string or integer such as '4', got " + DescribeNode(*version));
    } else if (std::string v; ReadString(*version, field, &v)) {
      env.version = v;
      Remember(field, *version, spec);
      if (!FindBaseEnvironment(v)) {
        Error(*version, field,
              fmt::format("'{}' is not a base environment air defines; known versions: {}", v,
                          KnownBaseEnvironmentVersions()));
      }
      if (!image && (!deps || !deps->IsSequence())) {
        Error(*version, field,
              deps ? "is only allowed with an inline dependencies list, not with a "
                     "requirements file"
                   : "is only allowed together with an inline dependencies list");
      }
    }
  }
  spec->environment = env;
}

void SpecValidator::ValidateDockerImage(const YamlNode& node, const std::string& field,
                                        DockerImageSpec* image, WorkloadSpec* spec) {
  MappingView view;
  if (!CheckMapping(node, field, {"url", "basic_auth"}, "url and basic_auth", &view)) return;
  if (Require(view, node, field, "url", "the image to run, e.g. ghcr.io/org/image:tag")) {
    const YamlNode& url = *view.Get("url");
    if (ReadString(url, field + ".url", &image->url)) {
      Remember(field + ".url", url, spec);
      if (image->url.find_first_of(" \t\n") != std::string::npos) {
        Error(url, field + ".url", "must not contain whitespace");
      }
    }
  }
  const YamlNode* auth = view.Get("basic_auth");
  if (!auth) return;
  MappingView auth_view;
  std::string auth_field = field + ".basic_auth";
  if (!CheckMapping(*auth, auth_field, {"username", "password"}, "username and password",
                    &auth_view)) {
    return;
  }
  if (Require(auth_view, *auth, auth_field, "username", "the registry user name")) {
    std::string user;
    if (ReadString(*auth_view.Get("username"), auth_field + ".username", &user)) {
      image->username = user;
    }
  }
  if (Require(auth_view, *auth, auth_field, "password",
              "a secret reference 'scope/key' holding the registry password")) {
    const YamlNode& pw = *auth_view.Get("password");
    std::string ref;
    if (ReadString(pw, auth_field + ".password", &ref)) {
      auto slash = ref.find('/');
      if (slash == std::string::npos || slash == 0 || slash + 1 == ref.size() ||
          ref.find('/', slash + 1) != std::string::npos) {
        Error(pw, auth_field + ".password",
              "must be a secret reference 'scope/key' (exactly one '/'); passwords are never "
              "written into the workload file");
      } else {
        image->password_secret = ref;
      }
    }
  }
}

void SpecValidator::ValidateCommand(const YamlNode& node, WorkloadSpec* spec) {
  std::string command;
  if (!node.IsScalar() || node.IsNull()) {
    Error(node, "command",
          "expected the shell command as a string (use 'command: |' for several "
          "lines), got " +
              DescribeNode(node));
    return;
  }
  if (!ReadString(node, "command", &command)) return;
  Remember("command", node, spec);
  size_t lines = CountCommandLines(command);
  if (lines > static_cast<size_t>(kMaxCommandLines)) {
    Error(node, "command",
          fmt::format("has {} lines; at most {} are allowed, move the logic into a script in the "
                      "code snapshot",
                      lines, kMaxCommandLines));
  }
  spec->command = command;
}

void SpecValidator::ValidateScalarFields(const MappingView& top, WorkloadSpec* spec) {
  int64_t n = 0;
  if (const YamlNode* node = top.Get("max_retries"); node && ReadInt(*node, "max_retries", &n)) {
    Remember("max_retries", *node, spec);
    if (n < 0 || n > kMaxRetries) {
      Error(*node, "max_retries",
            fmt::format("must be between 0 and {}, got {} (0 = no retries)", kMaxRetries, n));
    } else {
      spec->max_retries = static_cast<int>(n);
    }
  }
  if (const YamlNode* node = top.Get("timeout_minutes");
      node && ReadInt(*node, "timeout_minutes", &n)) {
    Remember("timeout_minutes", *node, spec);
    if (n < 1 || n > kMaxTimeoutMinutes) {
      Error(*node, "timeout_minutes",
            fmt::format("must be between 1 and {} (365 days), got {}", kMaxTimeoutMinutes, n));
    } else {
      spec->timeout_minutes = static_cast<int>(n);
    }
  }
  if (const YamlNode* node = top.Get("system_metrics_interval_s");
      node && ReadInt(*node, "system_metrics_interval_s", &n)) {
    Remember("system_metrics_interval_s", *node, spec);
    if (n < 0 || n > kMaxSystemMetricsIntervalS) {
      Error(*node, "system_metrics_interval_s",
            fmt::format("must be 0 (off) or between 1 and {} seconds, got {}",
                        kMaxSystemMetricsIntervalS, n));
    } else {
      spec->system_metrics_interval_s = static_cast<int>(n);
    }
  }
  // Optional text fields, at most `max_chars` characters (0: no limit).
  auto read_text = [&](const char* key, size_t max_chars, std::optional<std::string>* out) {
    std::string s;
    const YamlNode* node = top.Get(key);
    if (!node || !ReadString(*node, key, &s)) return;
    Remember(key, *node, spec);
    if (max_chars > 0 && CountCodePoints(s) > max_chars) {
      Error(*node, key,
            fmt::format("is {} characters long; at most {} are allowed", CountCodePoints(s),
                        max_chars));
    } else {
      *out = s;
    }
  };
  read_text("idempotency_token", kMaxIdempotencyTokenChars, &spec->idempotency_token);
  read_text("mlflow_run_name", kMaxRunNameChars, &spec->mlflow_run_name);
  read_text("mlflow_experiment_directory", 0, &spec->mlflow_experiment_directory);
}

}  // namespace air::spec
