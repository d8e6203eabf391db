// The MLflow tracking entities air stores (docs/tracking.md): experiments, runs with their
// params, tags and metrics. Field names and meanings follow MLflow's REST API: times are
// milliseconds since the epoch, ids are strings, a run's status is one of RUNNING, SCHEDULED,
// FINISHED, FAILED, KILLED.
// Thread safety: value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace air::tracking {

struct Experiment {
  std::string experiment_id;
  std::string name;
  std::string artifact_location;
  std::string lifecycle_stage = "active";
  int64_t creation_time = 0;
  int64_t last_update_time = 0;
  std::vector<std::pair<std::string, std::string>> tags;
};

struct Metric {
  std::string key;
  double value = 0;  // NaN is stored as is_nan with 0, +-inf as +-DBL_MAX (MLflow's rule)
  int64_t timestamp = 0;
  int64_t step = 0;
};

struct KeyValue {
  std::string key;
  std::string value;
};

struct RunInfo {
  std::string run_id;
  std::string experiment_id;
  std::string run_name;
  std::string user_id;
  std::string status = "RUNNING";
  int64_t start_time = 0;
  std::optional<int64_t> end_time;
  std::string artifact_uri;
  std::string lifecycle_stage = "active";
};

struct Run {
  RunInfo info;
  std::vector<Metric> metrics;  // the latest value of each key
  std::vector<KeyValue> params;
  std::vector<KeyValue> tags;
};

// A log-batch request, validated as a whole before anything is stored.
struct Batch {
  std::vector<Metric> metrics;
  std::vector<KeyValue> params;
  std::vector<KeyValue> tags;
};

// MLflow's run statuses.
bool IsRunStatus(const std::string& status);
bool IsTerminalRunStatus(const std::string& status);

// A fresh MLflow run id: 32 lowercase hex digits (a random 128-bit value).
std::string NewRunId();

}  // namespace air::tracking
