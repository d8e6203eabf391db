// The files through which a backend and a node agent talk (docs/run-directory.md):
//   attempt_K/node_N.json     NodeLaunch: what to run, where, with which environment
//   attempt_K/node_N.started  NodeStarted: the command's pid and process group
//   attempt_K/node_N.exit     NodeExitReport: how the command ended
//   attempt_K/node_N.alerts   known fatal or telling lines of its output (agent/alert_scanner.h)
//   attempt_K/node_N.metrics  the node's system metrics samples (agent/system_sample.h)
// Files, not a socket, so the same agent works under any launcher (a local fork, srun) and a
// restarted supervisor can read what happened. Reports are written atomically (temp + rename).
//
// Secret values are never in these files: `secret_names` lists the variables whose values the
// agent finds in its own environment (placed there by the backend at exec), to redact them.
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/env.h"
#include "base/status.h"

namespace air::agent {

struct NodeLaunch {
  int64_t run_id = 0;
  int attempt = 0;
  int node_rank = 0;
  std::string command;  // run as `bash -c command`
  std::string shell = "/bin/bash";
  std::string workdir;  // the command's working directory
  std::string log_path;
  std::string started_path;
  std::string exit_path;
  std::string tracker_path;  // agent/process_tracker.h; "" = beside started_path (.tracker)
  // Set on top of the agent's inherited environment, in order (non-secret values only).
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> secret_names;  // inherited variables that hold secret values
  int grace_seconds = 10;                 // SIGTERM -> SIGKILL when air stops the node
  // Non-empty: the node runs in a private mount namespace with this directory on /Volumes
  // (agent/volume_mounts.h).
  std::string volumes_root;
  // The spec names /Volumes paths: a node that cannot get the mount fails. Otherwise the mount
  // is a precaution and the node runs without it (a note in its log says why).
  bool volumes_required = true;
  uint64_t log_max_bytes = 0;  // node log size cap before rotation (agent/log_format.h); 0: none
  int log_keep = 2;            // rotated parts kept
  // > 0: sample the node's system metrics every this many seconds into metrics_path
  // (agent/system_sampler.h); 0: off.
  int system_metrics_interval_s = 0;
  std::string metrics_path;
};

struct NodeStarted {
  int64_t agent_pid = 0;
  int64_t pid = 0;   // the command's shell
  int64_t pgid = 0;  // its process group (== pid)
  int64_t started_us = 0;
  std::string host;  // the machine it runs on: Slurm's NodeName under Slurm, else the hostname
};

struct NodeExitReport {
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool stopped_by_air = false;  // a stop had been requested before the command ended
  int64_t pid = 0;
  int64_t pgid = 0;
  int64_t started_us = 0;
  int64_t ended_us = 0;
  std::string error;  // the agent's own failure (cannot open the log, exec failed, ...)
};

std::string NodeLaunchToJson(const NodeLaunch& launch);
Result<NodeLaunch> NodeLaunchFromJson(const std::string& text, const std::string& path);
std::string NodeStartedToJson(const NodeStarted& started);
Result<NodeStarted> NodeStartedFromJson(const std::string& text, const std::string& path);
std::string NodeExitReportToJson(const NodeExitReport& report);
Result<NodeExitReport> NodeExitReportFromJson(const std::string& text, const std::string& path);

// Where the agent writes the node's tracker file (TrackerInfo).
std::string TrackerPath(const NodeLaunch& launch);
// Where the agent appends the node's alerts (agent/alert_scanner.h): beside the exit report,
// attempt_K/node_N.alerts.
std::string AlertsPath(const NodeLaunch& launch);

// Reads and parses a report; kNotFound when the file does not exist (yet).
Result<NodeStarted> ReadNodeStarted(Env* env, const std::string& path);
Result<NodeExitReport> ReadNodeExitReport(Env* env, const std::string& path);

}  // namespace air::agent
