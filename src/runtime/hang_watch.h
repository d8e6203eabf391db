// HangWatch: notices when a running attempt has gone silent (hang_timeout_minutes,
// docs/state-machine.md "Hangs"). A node is alive while its log changes (its size, or its
// mtime, which the agent bumps when a progress bar redraws an unfinished line; a rotation
// counts too; read once a second); the workload is alive while the metrics it logs
// change (a marker from the tracking store, tracking/workload_metrics.h, asked once a second). When
// neither happened for the timeout, the attempt is hung, and the watch says which nodes went silent
// first and their last lines.
//
// The clock starts once every node has started (time queued in a scheduler is not silence),
// and only nodes still running are named. A hang is reported once. Everything the watch reads
// goes through the Env (the clock, file sizes) and the marker callback, so tests drive it with a
// fake clock and real files.
// Thread safety: one thread (the attempt's runner).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/env.h"

namespace air::runtime {

struct HangWatchOptions {
  int64_t timeout_us = 0;
  std::string timeout_text;            // "hang_timeout_minutes: 30" for messages
  std::vector<std::string> node_logs;  // per node rank
  // A text that changes whenever the workload logs a metric; "" when unknown (no tracking run
  // in air's store). Asked at most every metric_interval_us.
  std::function<std::string()> metric_marker;
  int64_t metric_interval_us = 1'000'000;
  // How often the node logs' sizes are read (a stat per node: on a shared file system too).
  int64_t output_interval_us = 1'000'000;
  size_t last_lines = 5;  // per named node
  size_t max_named_nodes = 4;
};

enum class NodeLife { kNotStarted, kRunning, kEnded };

struct SilentNode {
  int node_rank = 0;
  int64_t silent_us = 0;   // since its last output (or since the watch started)
  std::string last_lines;  // "  line\n  line" (runtime/failure.h LastLogLines), "" when none
};

struct Hang {
  int64_t silent_us = 0;  // since the last output of any node or metric of the workload
  // The running nodes, the first to go silent first (at most max_named_nodes), and how many
  // more running nodes were silent too.
  std::vector<SilentNode> nodes;
  size_t more_nodes = 0;

  // "no node wrote output or logged a metric for 62 s (hang_timeout_minutes: 1); node 1 went
  // silent first (62 s), then node 0 (61 s)\nlast lines of node 1:\n  ...".
  std::string Describe(const std::string& timeout_text) const;
  // "node 1, node 0": the named nodes, in order.
  std::string NodeNames() const;
};

class HangWatch {
 public:
  HangWatch(Env* env, HangWatchOptions options);

  // One look, with each node's life (by rank). Returns the hang the first time the whole
  // attempt has been silent for the timeout; nullopt otherwise (and ever after).
  std::optional<Hang> Check(const std::vector<NodeLife>& lives);

 private:
  void Observe(const std::vector<NodeLife>& lives, int64_t now);

  Env* env_;
  HangWatchOptions options_;
  bool armed_ = false;
  bool reported_ = false;
  std::vector<std::optional<std::pair<uint64_t, int64_t>>> log_states_;  // log size, mtime per node
  std::vector<int64_t> last_output_us_;                                  // monotonic, per node
  std::string marker_;
  int64_t last_metric_us_ = 0;
  int64_t next_marker_us_ = 0;
  int64_t next_logs_us_ = 0;
};

}  // namespace air::runtime
