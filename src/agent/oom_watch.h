// OomWatch: the kernel's OOM kills of a node's processes as alerts (docs/alerts.md,
// "oom_killer"). A worker the OOM killer SIGKILLs under a memory limit prints nothing; the
// kernel counts the kill in the memory cgroup the worker was in. The agent reads that counter
// before the command starts, about once a second while it runs and once after it ended, and
// records each rise as one `oom_killer` alert (its count, the cgroup's memory limit and peak,
// the counter file) in the node's alerts file (agent/alert_scanner.h).
//
// Which counter: cgroup v2's `oom_kill` in memory.events of the nearest cgroup at or above the
// node's command that has one (the node's own cgroup where the memory controller reaches it; else
// an ancestor, which may hold other processes too: the record says so); else, on hosts whose
// memory controller is on a v1 hierarchy, `oom_kill` in memory.oom_control of the node's own v1
// memory cgroup (agent/process_tracker.h TrackerInfo::memory_cgroup). No counter: no watch.
// Files are read through the Env, so tests point the watch at any directory holding the
// kernel's file formats.
// Thread safety: one OomWatch per node agent, used by its main thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "agent/alert_scanner.h"
#include "agent/node_launch.h"
#include "agent/process_tracker.h"
#include "base/env.h"
#include "base/status.h"

namespace air::agent {

// How often the agent reads the counter while the command runs.
inline constexpr int64_t kOomCheckMicros = 1'000'000;

struct MemoryCgroup {
  std::string dir;
  bool v2 = true;   // memory.events (v2) or memory.oom_control (v1)
  bool own = true;  // the node's own cgroup; false: an ancestor shared with other processes
};

// What the counter file and its neighbours say now.
struct OomCounters {
  int64_t oom_kill = 0;
  std::optional<uint64_t> limit;  // the smallest memory limit of the cgroup and its ancestors
  std::optional<uint64_t> peak;   // the cgroup's peak usage (memory.peak, v1 max_usage_in_bytes)
};

// The `oom_kill` value of memory.events (v2) or memory.oom_control (v1) text; nullopt when the
// text has none (a kernel before 4.13).
std::optional<int64_t> ParseOomKill(std::string_view text);

// The counters of `cgroup`; an error when its counter file cannot be read or has no oom_kill.
Result<OomCounters> ReadOomCounters(const MemoryCgroup& cgroup, Env* env);

// The memory cgroup whose counter covers the node's command (above), or nullopt.
std::optional<MemoryCgroup> NodeMemoryCgroup(const TrackerInfo& tracker, Env* env);

class OomWatch {
 public:
  // The node's watch (nullptr when no counter covers it). The rank of the node's alerts is the
  // node's rank when it runs one process (LOCAL_WORLD_SIZE 1), else unknown.
  static std::unique_ptr<OomWatch> ForNode(const NodeLaunch& launch, const TrackerInfo& tracker,
                                           Env* env);
  // Reads the counter's starting value (kills before the command are not the node's).
  OomWatch(MemoryCgroup cgroup, std::optional<int> rank, Env* env);

  // Reads the counter; when it rose since the last read, records one alert in `alerts`.
  void Check(AlertScanner* alerts);

  const MemoryCgroup& cgroup() const { return cgroup_; }

 private:
  MemoryCgroup cgroup_;
  std::optional<int> rank_;
  Env* env_;
  int64_t seen_ = 0;  // the counter's value at the last read
};

}  // namespace air::agent
