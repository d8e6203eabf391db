// JSON encoding of WorkloadSpec (field names follow the YAML keys).
#include "runtime/spec_codec.h"

namespace air::runtime {
namespace {

using nlohmann::json;

template <typename T>
void PutOptional(json& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
}

template <typename T>
std::optional<T> GetOptional(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->template get<T>();
}

json ComputeToJson(const spec::ComputeSpec& c) {
  return {{"accelerator_type", c.accelerator_type},
          {"num_accelerators", c.num_accelerators},
          {"kind", c.kind == spec::AcceleratorKind::kGpu ? "gpu" : "cpu"},
          {"device_model", c.device_model},
          {"per_node", c.per_node},
          {"num_nodes", c.num_nodes},
          {"min_nodes", c.min_nodes}};
}

spec::ComputeSpec ComputeFromJson(const json& j) {
  spec::ComputeSpec c;
  c.accelerator_type = j.at("accelerator_type").get<std::string>();
  c.num_accelerators = j.at("num_accelerators").get<int>();
  c.kind = j.at("kind").get<std::string>() == "gpu" ? spec::AcceleratorKind::kGpu
                                                    : spec::AcceleratorKind::kCpu;
  c.device_model = j.at("device_model").get<std::string>();
  c.per_node = j.at("per_node").get<int>();
  c.num_nodes = j.at("num_nodes").get<int>();
  // Runs submitted before min_nodes existed never shrink.
  c.min_nodes = j.value("min_nodes", c.num_nodes);
  return c;
}

json EnvironmentToJson(const spec::EnvironmentSpec& e) {
  json j = json::object();
  PutOptional(j, "version", e.version);
  j["dependencies"] = e.dependencies;
  PutOptional(j, "requirements_file", e.requirements_file);
  if (e.docker_image) {
    json d = {{"url", e.docker_image->url}};
    PutOptional(d, "username", e.docker_image->username);
    PutOptional(d, "password_secret", e.docker_image->password_secret);
    j["docker_image"] = d;
  }
  return j;
}

spec::EnvironmentSpec EnvironmentFromJson(const json& j) {
  spec::EnvironmentSpec e;
  e.version = GetOptional<std::string>(j, "version");
  e.dependencies = j.at("dependencies").get<std::vector<std::string>>();
  e.requirements_file = GetOptional<std::string>(j, "requirements_file");
  if (auto it = j.find("docker_image"); it != j.end()) {
    spec::DockerImageSpec d;
    d.url = it->at("url").get<std::string>();
    d.username = GetOptional<std::string>(*it, "username");
    d.password_secret = GetOptional<std::string>(*it, "password_secret");
    e.docker_image = d;
  }
  return e;
}

json CodeSourceToJson(const spec::CodeSourceSpec& c) {
  json snapshot = {{"root_path", c.snapshot.root_path},
                   {"resolved_root", c.snapshot.resolved_root},
                   {"include_paths", c.snapshot.include_paths},
                   {"max_size_mb", c.snapshot.max_size_mb}};
  if (c.snapshot.git) {
    json git = json::object();
    PutOptional(git, "branch", c.snapshot.git->branch);
    PutOptional(git, "commit", c.snapshot.git->commit);
    snapshot["git"] = git;
  }
  return {{"type", c.type}, {"snapshot", snapshot}};
}

spec::CodeSourceSpec CodeSourceFromJson(const json& j) {
  spec::CodeSourceSpec c;
  c.type = j.at("type").get<std::string>();
  const json& s = j.at("snapshot");
  c.snapshot.root_path = s.at("root_path").get<std::string>();
  c.snapshot.resolved_root = s.at("resolved_root").get<std::string>();
  c.snapshot.include_paths = s.at("include_paths").get<std::vector<std::string>>();
  c.snapshot.max_size_mb = s.value("max_size_mb", spec::kDefaultSnapshotMaxSizeMb);
  if (auto it = s.find("git"); it != s.end()) {
    spec::GitRefSpec git;
    git.branch = GetOptional<std::string>(*it, "branch");
    git.commit = GetOptional<std::string>(*it, "commit");
    c.snapshot.git = git;
  }
  return c;
}

}  // namespace

nlohmann::json SpecToJson(const spec::WorkloadSpec& spec) {
  json j;
  j["format"] = 1;
  j["source_path"] = spec.source_path;
  j["source_dir"] = spec.source_dir;
  j["experiment_name"] = spec.experiment_name;
  j["compute"] = ComputeToJson(spec.compute);
  if (spec.environment) j["environment"] = EnvironmentToJson(*spec.environment);
  if (spec.code_source) j["code_source"] = CodeSourceToJson(*spec.code_source);
  j["command"] = spec.command;
  json env = json::array();
  for (const auto& [name, value] : spec.env_variables) env.push_back({name, value});
  j["env_variables"] = env;
  json secrets = json::array();
  for (const auto& [name, ref] : spec.secrets) secrets.push_back({name, ref.scope, ref.key});
  j["secrets"] = secrets;
  j["max_retries"] = spec.max_retries;
  PutOptional(j, "timeout_minutes", spec.timeout_minutes);
  j["system_metrics_interval_s"] = spec.system_metrics_interval_s;
  PutOptional(j, "hang_timeout_minutes", spec.hang_timeout_minutes);
  if (spec.hang_timeout_minutes) j["on_hang"] = spec::OnHangName(spec.on_hang);
  PutOptional(j, "parameters_yaml", spec.parameters_yaml);
  PutOptional(j, "idempotency_token", spec.idempotency_token);
  PutOptional(j, "mlflow_run_name", spec.mlflow_run_name);
  PutOptional(j, "mlflow_experiment_directory", spec.mlflow_experiment_directory);
  json permissions = json::array();
  for (const auto& p : spec.permissions) {
    permissions.push_back(
        {{"principal", p.principal}, {"principal_kind", p.principal_kind}, {"level", p.level}});
  }
  j["permissions"] = permissions;
  json locations = json::object();
  for (const auto& [field, loc] : spec.field_locations) locations[field] = {loc.line, loc.column};
  j["field_locations"] = locations;
  return j;
}

Result<spec::WorkloadSpec> SpecFromJson(const nlohmann::json& j) {
  try {
    if (j.value("format", 0) != 1) {
      return DataLoss("stored spec has an unknown format (expected format 1)");
    }
    spec::WorkloadSpec spec;
    spec.source_path = j.at("source_path").get<std::string>();
    spec.source_dir = j.at("source_dir").get<std::string>();
    spec.experiment_name = j.at("experiment_name").get<std::string>();
    spec.compute = ComputeFromJson(j.at("compute"));
    if (auto it = j.find("environment"); it != j.end()) {
      spec.environment = EnvironmentFromJson(*it);
    }
    if (auto it = j.find("code_source"); it != j.end()) {
      spec.code_source = CodeSourceFromJson(*it);
    }
    spec.command = j.at("command").get<std::string>();
    for (const auto& pair : j.at("env_variables")) {
      spec.env_variables.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
    }
    for (const auto& triple : j.at("secrets")) {
      spec.secrets.emplace_back(
          triple.at(0).get<std::string>(),
          spec::SecretRef{triple.at(1).get<std::string>(), triple.at(2).get<std::string>()});
    }
    spec.max_retries = j.at("max_retries").get<int>();
    spec.timeout_minutes = GetOptional<int>(j, "timeout_minutes");
    spec.system_metrics_interval_s = j.value("system_metrics_interval_s", 10);  // older specs
    spec.hang_timeout_minutes = GetOptional<double>(j, "hang_timeout_minutes");
    spec.on_hang =
        j.value("on_hang", "fail") == "restart" ? spec::OnHang::kRestart : spec::OnHang::kFail;
    spec.parameters_yaml = GetOptional<std::string>(j, "parameters_yaml");
    spec.idempotency_token = GetOptional<std::string>(j, "idempotency_token");
    spec.mlflow_run_name = GetOptional<std::string>(j, "mlflow_run_name");
    spec.mlflow_experiment_directory = GetOptional<std::string>(j, "mlflow_experiment_directory");
    for (const auto& p : j.at("permissions")) {
      spec.permissions.push_back({p.at("principal").get<std::string>(),
                                  p.at("principal_kind").get<std::string>(),
                                  p.at("level").get<std::string>()});
    }
    if (auto it = j.find("field_locations"); it != j.end()) {
      for (const auto& [field, loc] : it->items()) {
        spec.field_locations[field] = {loc.at(0).get<int>(), loc.at(1).get<int>()};
      }
    }
    return spec;
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(std::string("stored spec is damaged: ") + e.what());
  }
}

Result<spec::WorkloadSpec> SpecFromJsonText(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLoss("stored spec is not valid JSON");
  return SpecFromJson(j);
}

}  // namespace air::runtime
