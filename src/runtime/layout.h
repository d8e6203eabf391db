// Where everything lives under AIR_HOME (docs/run-directory.md). One place computes every path,
// so the CLI, the supervisor, the backends and the agent agree. The store stays in AIR_HOME;
// everything the nodes read or write lives under the data root ROOT: AIR_HOME itself unless
// AIR_HOME/config.yaml names a `shared_root` (a directory every node of a cluster sees;
// backends/cluster_registry.h, docs/slurm.md).
//
//   AIR_HOME/air.db                         the store (SQLite, WAL)
//   ROOT/cas/sha256/ab/<digest>             snapshot file contents, read-only, shared by runs
//   ROOT/snapshots/<digest>.json            snapshot manifests (path, digest, mode, size)
//   ROOT/envs/<digest>/                     Python environments keyed by their dependencies
//   ROOT/volumes/<catalog>/<schema>/<vol>/  what nodes see at /Volumes (or config volumes_root)
//   ROOT/runs/<id>/                         one run
//       supervisor.log                      the supervisor's own diagnostics
//       setup.log                           environment preparation (pip) output
//       parameters.yaml                     the spec's parameters block (HYPERPARAMETERS_PATH)
//       environments                        the envs/ entries its nodes use (for retention)
//       nodes/node_<n>/                     node n's working directory (materialized snapshot)
//       attempt_<k>/node_<n>.json           what the agent runs (launch file, no secret values)
//       attempt_<k>/node_<n>.log            node n's output, one timestamped line per line
//       attempt_<k>/node_<n>.started        the agent's start report (pid, pgid)
//       attempt_<k>/node_<n>.exit           the agent's exit report
//       attempt_<k>/node_<n>.tracker        how to find every process of the node (cgroup, token)
//       attempt_<k>/node_<n>.alerts         known fatal lines of its output (agent/alert_scanner.h)
//       attempt_<k>/node_<n>.metrics        the node's system metrics samples, one JSON per line
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air::runtime {

class Layout {
 public:
  explicit Layout(std::string air_home)
      : home_(std::move(air_home)), root_(home_), volumes_root_(home_ + "/volumes") {}
  Layout(std::string air_home, std::string data_root, std::string volumes_root = "")
      : home_(std::move(air_home)),
        root_(data_root.empty() ? home_ : std::move(data_root)),
        volumes_root_(volumes_root.empty() ? root_ + "/volumes" : std::move(volumes_root)) {}

  const std::string& home() const { return home_; }
  const std::string& data_root() const { return root_; }
  // What nodes see at /Volumes: config.yaml's volumes_root, else ROOT/volumes
  // (runtime/volumes.h; $AIR_VOLUMES_ROOT overrides both).
  const std::string& configured_volumes_root() const { return volumes_root_; }
  std::string DbPath() const { return home_ + "/air.db"; }
  std::string CasDir() const { return root_ + "/cas/sha256"; }
  std::string CasPath(const std::string& digest) const {
    return CasDir() + "/" + digest.substr(0, 2) + "/" + digest;
  }
  std::string SnapshotsDir() const { return root_ + "/snapshots"; }
  std::string SnapshotManifest(const std::string& digest) const {
    return SnapshotsDir() + "/" + digest + ".json";
  }
  std::string EnvsDir() const { return root_ + "/envs"; }
  std::string RunsDir() const { return root_ + "/runs"; }
  std::string RunDir(int64_t run_id) const { return RunsDir() + "/" + std::to_string(run_id); }
  std::string SupervisorLog(int64_t run_id) const { return RunDir(run_id) + "/supervisor.log"; }
  std::string SetupLog(int64_t run_id) const { return RunDir(run_id) + "/setup.log"; }
  std::string ParametersFile(int64_t run_id) const { return RunDir(run_id) + "/parameters.yaml"; }
  // The environments (names under envs/) the run's nodes use, one per line: what retention
  // keeps while the run exists.
  std::string RunEnvironmentsFile(int64_t run_id) const { return RunDir(run_id) + "/environments"; }
  // Held shared while a run is submitted or prepared, exclusive by `air delete` and `air gc`.
  std::string RetentionLock() const { return home_ + "/retention.lock"; }
  std::string NodeWorkDir(int64_t run_id, int node) const {
    return RunDir(run_id) + "/nodes/node_" + std::to_string(node);
  }
  std::string AttemptDir(int64_t run_id, int attempt) const {
    return RunDir(run_id) + "/attempt_" + std::to_string(attempt);
  }
  std::string NodeFile(int64_t run_id, int attempt, int node, const char* suffix) const {
    return AttemptDir(run_id, attempt) + "/node_" + std::to_string(node) + suffix;
  }
  std::string NodeLog(int64_t run_id, int attempt, int node) const {
    return NodeFile(run_id, attempt, node, ".log");
  }
  std::string NodeLaunchFile(int64_t run_id, int attempt, int node) const {
    return NodeFile(run_id, attempt, node, ".json");
  }
  std::string NodeStartedFile(int64_t run_id, int attempt, int node) const {
    return NodeFile(run_id, attempt, node, ".started");
  }
  std::string NodeExitFile(int64_t run_id, int attempt, int node) const {
    return NodeFile(run_id, attempt, node, ".exit");
  }
  std::string NodeTrackerFile(int64_t run_id, int attempt, int node) const {
    return NodeFile(run_id, attempt, node, ".tracker");
  }
  std::string NodeAlertsFile(int64_t run_id, int attempt, int node) const {
    return NodeFile(run_id, attempt, node, ".alerts");
  }
  std::string NodeMetricsFile(int64_t run_id, int attempt, int node) const {
    return NodeFile(run_id, attempt, node, ".metrics");
  }

 private:
  std::string home_;
  std::string root_;
  std::string volumes_root_;
};

// The layout of `air_home` with the data root AIR_HOME/config.yaml names (shared_root, and
// volumes_root), so
// every command finds the same files (layout_config.cc).
Result<Layout> ResolveLayout(const std::string& air_home, Env* env);

}  // namespace air::runtime
