// `air get`'s view of system metrics: the latest sample of each node of the run's latest attempt
// that has one, read from the nodes' metrics files (agent/system_sample.h) — so it shows the same
// whether the run is tracked by air's server or an external one.
//   JSON  "system_metrics": {"attempt": 0, "nodes": [{"node_rank": 0, "ts_us": ..., "time": ...,
//          "metrics": {"cpu_utilization_percentage": 12.5, ...}}]}   (null: no sample yet)
//   text  system       node 0 at 2026-12-05T14:12:20Z: cpu 22.3%, memory 8.4 MB, disk read/write
//                      0.0/0.0 MB, network in/out 0.0/0.0 MB
//                      node 0 gpu 0: 37% busy, memory 1074/85899 MB, 123.5 W, 55 C
// Thread safety: pure functions over files.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/system_sample.h"
#include "base/env.h"
#include "runtime/layout.h"
#include "runtime/run_view.h"

namespace air::runtime {

struct NodeSystemSample {
  int node_rank = 0;
  agent::SystemSample sample;
};

struct LatestSystemSamples {
  int attempt = -1;  // -1: no node has a sample
  std::vector<NodeSystemSample> nodes;
};

LatestSystemSamples LoadLatestSystemSamples(const Layout& layout, const RunDetails& details,
                                            Env* env);

nlohmann::json LatestSystemSamplesJson(const LatestSystemSamples& latest);
std::string LatestSystemSamplesText(const LatestSystemSamples& latest);

}  // namespace air::runtime
