// WorkloadSpec: the typed form of a workload YAML (docs/workload-spec.md, REFERENCES.md §1).
//
// Produced by ParseWorkloadSpec (spec/parser.h) after every rule has been checked; consumers
// (the plan, the runtime, the backends) may rely on the invariants noted per field. Maps keep
// the order in which the user wrote them. Plain values: copyable, no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace air::spec {

// 1-based line and column of a YAML node in the workload file (0 when unknown).
struct SourceLocation {
  int line = 0;
  int column = 0;
};

enum class AcceleratorKind { kGpu, kCpu };

// on_hang: what a hang (hang_timeout_minutes) does to the run (docs/workload-spec.md).
enum class OnHang {
  kFail,     // the attempt fails and the run ends FAILED, without a retry
  kRestart,  // the attempt is stopped and retried like any failed attempt (max_retries)
};

struct ComputeSpec {
  std::string accelerator_type;  // as written: "GPU_8xH100", "CPU_2", ...
  int num_accelerators = 0;      // > 0, a multiple of per_node
  // Derived from accelerator_type and num_accelerators:
  AcceleratorKind kind = AcceleratorKind::kGpu;
  std::string device_model;  // "H100", "H200", "A10"; "CPU" for CPU shapes
  int per_node = 0;          // GPUs (or worker processes for CPU_<n>) per node
  int num_nodes = 0;         // num_accelerators / per_node
  // compute.min_nodes: the fewest nodes an attempt may continue on after nodes were lost
  // (docs/state-machine.md, "Elastic retries"); 1 <= min_nodes <= num_nodes, default num_nodes
  // (no shrinking).
  int min_nodes = 0;
};

struct DockerImageSpec {
  std::string url;
  std::optional<std::string> username;         // basic_auth.username (secret reference allowed)
  std::optional<std::string> password_secret;  // basic_auth.password as "scope/key"
};

struct EnvironmentSpec {
  std::optional<std::string> version;            // client image version; only with dependencies
  std::vector<std::string> dependencies;         // inline pip requirement strings
  std::optional<std::string> requirements_file;  // or a path to a requirements file
  std::optional<DockerImageSpec> docker_image;   // excludes version and dependencies
};

struct GitRefSpec {
  std::optional<std::string> branch;  // exactly one of branch and commit
  std::optional<std::string> commit;
};

// The default of code_source.snapshot.max_size_mb.
inline constexpr int64_t kDefaultSnapshotMaxSizeMb = 1024;

struct SnapshotSpec {
  std::string root_path;                   // as written (may be relative to the YAML's dir)
  std::string resolved_root;               // absolute path
  std::vector<std::string> include_paths;  // relative, no "..", non-empty when given
  std::optional<GitRefSpec> git;
  // max_size_mb: the largest snapshot accepted, in MiB (spec::ScanSnapshot names the largest
  // entries when it is passed).
  int64_t max_size_mb = kDefaultSnapshotMaxSizeMb;
};

struct CodeSourceSpec {
  std::string type = "snapshot";  // the only type
  SnapshotSpec snapshot;
};

struct SecretRef {
  std::string scope;
  std::string key;
  std::string ToString() const { return scope + "/" + key; }
};

struct PermissionSpec {
  std::string principal;  // user_name / group_name / service_principal_name value
  std::string principal_kind;
  std::string level;  // e.g. CAN_VIEW, CAN_MANAGE
};

// Lines of a command as the 1000-line rule and the plan count them: trailing blank lines
// (as a `|+` block keeps them) are not counted.
inline size_t CountCommandLines(std::string_view command) {
  size_t end = command.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return 0;
  size_t lines = 1;
  for (size_t i = 0; i < end; ++i) lines += command[i] == '\n';
  return lines;
}

inline constexpr double kMinHangTimeoutMinutes = 0.01;   // 0.6 s
inline constexpr double kMaxHangTimeoutMinutes = 10080;  // 7 days
inline const char* OnHangName(OnHang on_hang) {
  return on_hang == OnHang::kRestart ? "restart" : "fail";
}

struct WorkloadSpec {
  std::string source_path;      // the YAML file this came from (absolute)
  std::string source_dir;       // its directory: relative paths resolve against it
  std::string experiment_name;  // [A-Za-z0-9_-]{1,100}
  ComputeSpec compute;
  std::optional<EnvironmentSpec> environment;
  std::optional<CodeSourceSpec> code_source;
  std::string command;                                             // non-empty, <= 1000 lines
  std::vector<std::pair<std::string, std::string>> env_variables;  // NAME -> value, as written
  std::vector<std::pair<std::string, SecretRef>> secrets;          // NAME -> scope/key
  int max_retries = 3;
  std::optional<int> timeout_minutes;  // >= 1
  int system_metrics_interval_s = 10;  // 0: off; else 1..3600 (docs/tracking.md)
  // hang_timeout_minutes: how long every node may go without output or a logged metric before
  // the attempt counts as hung; kMinHangTimeoutMinutes..kMaxHangTimeoutMinutes, unset: off.
  std::optional<double> hang_timeout_minutes;
  OnHang on_hang = OnHang::kFail;                // set only with hang_timeout_minutes
  std::optional<std::string> parameters_yaml;    // the parameters block re-emitted as YAML text
  std::optional<std::string> idempotency_token;  // <= 64 chars
  std::optional<std::string> mlflow_run_name;
  std::optional<std::string> mlflow_experiment_directory;
  std::vector<PermissionSpec> permissions;

  // Where each field's value was written ("compute.num_accelerators" -> 3:20), for errors found
  // after validation (an unknown git revision, a missing secret). Values set by an --override
  // have no position (0:0).
  std::map<std::string, SourceLocation> field_locations;
  // For values set by an override: field -> "--override FIELD=VALUE".
  std::map<std::string, std::string> field_origins;
  SourceLocation LocationOf(const std::string& field) const {
    auto it = field_locations.find(field);
    return it == field_locations.end() ? SourceLocation{} : it->second;
  }
  std::string OriginOf(const std::string& field) const {
    auto it = field_origins.find(field);
    return it == field_origins.end() ? std::string() : it->second;
  }
};

}  // namespace air::spec
