// The supervisor's side of system metrics (docs/tracking.md "System metrics"): each node's agent
// appends samples to attempt_K/node_N.metrics (agent/system_sampler.h; files, as everything
// between a node and its launcher, so it works the same on a Slurm node that shares the data
// root); the attempt's poll loop hands the new lines to this ingester, which stores them in the
// run's MLflow run as MLflow's system metrics, named as MLflow's monitor names them with a
// node_id: `system/node_<rank>/<metric>` (mlflow/system_metrics/system_metrics_monitor.py).
// A point's timestamp is the sample's time and its step the whole seconds since the run
// started, so nodes and attempts line up on one axis.
//
// Batched (runs/log-batch of at most 1000 points, at most every kIngestEveryUs while the
// attempt runs, and once more when it ends), bounded (a node writes at most
// agent::kMaxSamples samples per attempt; a poll reads at most a block of each file), and never
// in the run's way: a failure to store is one `system_metrics` event, the points are tried
// again kRetryAfterFailureUs later (what the attempt's end leaves unstored is dropped), and the
// run goes on. A node's note (no GPU metrics, and why) is a `system_metrics` event too, once
// per attempt for the same text.
// Thread safety: one thread (the supervisor's).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/env.h"
#include "runtime/layout.h"
#include "runtime/log_reader.h"
#include "runtime/tracking_link.h"
#include "store/store.h"
#include "tracking/entities.h"

namespace air::runtime {

class SystemMetricsIngester {
 public:
  static constexpr int64_t kIngestEveryUs = 2'000'000;
  static constexpr size_t kMaxPointsPerBatch = 1000;  // MLflow's log-batch limit
  // After a failure to store, the next try (the points wait in memory, new lines in the files,
  // so a server that is down for a while stalls the attempt's loop once per this long at most).
  static constexpr int64_t kRetryAfterFailureUs = 30'000'000;

  SystemMetricsIngester(store::Store* store, const Layout& layout, int64_t run_id, int attempt,
                        int num_nodes, Env* env);

  // Stores what the nodes appended since the last call: at most every kIngestEveryUs and a
  // block of each file per call, unless `final` (the attempt ended: everything left).
  void Poll(bool final);

  int64_t points_stored() const { return points_stored_; }

 private:
  void Ingest(int node_rank, const std::string& line);
  // Stores the pending points; false (keeping the unsent ones) when a batch failed.
  bool Flush();
  void Event(const std::string& message, std::optional<int> node_rank);

  store::Store* store_;
  std::string air_home_;
  int64_t run_id_;
  int attempt_;
  Env* env_;
  std::vector<LogFollower> files_;  // per node
  int64_t step_origin_us_ = 0;      // the run's start
  int64_t next_poll_us_ = 0;        // monotonic
  std::optional<TrackingRunWriter> writer_;
  bool writer_opened_ = false;
  bool failure_reported_ = false;  // one event for the first failure to read or store
  std::set<std::string> notes_seen_;
  std::vector<tracking::Metric> pending_;
  int64_t points_stored_ = 0;
};

}  // namespace air::runtime
