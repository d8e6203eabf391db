// One line of a node's system metrics file (attempt_K/node_N.metrics, docs/tracking.md "System
// metrics"): the agent appends a sample every system_metrics_interval_s, the supervisor stores
// new lines in the run's MLflow run (runtime/system_metrics_ingest.h) and `air get` shows the
// last one (runtime/system_metrics_view.h). A line is either a sample or a note:
//   {"ts_us": 1796002627672293, "metrics": {"cpu_utilization_percentage": 12.5, ...}}
//   {"ts_us": 1796002627672293, "note": "no GPU metrics: ..."}
// Metric names are MLflow's system metric names (mlflow/system_metrics/metrics/*.py) without
// the "system/" prefix, plus the few air adds (listed in docs/tracking.md).
// Thread safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace air::agent {

struct SystemSample {
  int64_t ts_us = 0;
  std::vector<std::pair<std::string, double>> metrics;  // in the order measured
  std::string note;                                     // non-empty: a note, not a sample

  // The value of `name`, or nullptr.
  const double* Find(const std::string& name) const;
};

// One line, with its newline.
std::string SystemSampleToLine(const SystemSample& sample);
// A line without its newline; DataLoss naming `path` for anything else.
Result<SystemSample> SystemSampleFromLine(const std::string& line, const std::string& path);

// MLflow's prefix for a node's system metrics (the monitor's node_id option):
// "system/node_<rank>/".
std::string SystemMetricPrefix(int node_rank);

}  // namespace air::agent
