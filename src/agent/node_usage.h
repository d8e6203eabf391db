// What a node's processes use, for its system metrics (agent/system_sampler.h), under MLflow's
// system metric names (docs/tracking.md "System metrics" says what each measures):
//   cpu_utilization_percentage      the node's processes' CPU time over the interval, as a share
//                                   of the CPUs the node may run on (its affinity mask)
//   system_memory_usage_megabytes   their memory; system_memory_usage_percentage of the machine's
//   disk_read_megabytes, disk_write_megabytes   their storage I/O since the node started (air's)
//   disk_usage_megabytes, disk_available_megabytes, disk_usage_percentage   the file system of
//                                   the node's working directory
//   network_receive_megabytes, network_transmit_megabytes   since the node started, through the
//                                   node's network interfaces other than loopback (node-level:
//                                   /proc/net/dev)
// The node's processes are found as process tracking keeps them (agent/process_tracker.h): the
// command's cgroup, whose own counters are read where the cgroup v2 controllers give them
// (cpu.stat, memory.current, io.stat), else each member's /proc entries; without a cgroup, the
// agent's descendants (it is their subreaper). Per-process counters are summed by difference
// from the previous reading of the same process, so a process that ends takes nothing away.
// Megabytes are 10^6 bytes, as MLflow's.
// Thread safety: a NodeUsageMeter is used by one thread (the sampler's).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/process_tracker.h"

namespace air::agent {

struct NodeUsageSource {
  TrackerKind kind = TrackerKind::kSession;
  std::string command_cgroup;  // the cgroup kinds: the node's cgroup/cmd
  pid_t agent_pid = 0;         // every kind: its descendants are the node's processes
  std::string workdir;         // whose file system's usage is reported
};

class NodeUsageMeter {
 public:
  // Takes the baseline the first reading is measured from.
  NodeUsageMeter(NodeUsageSource source, int64_t now_monotonic_us);

  // The metrics since the previous reading (or the baseline); none when no process of the node
  // is alive (the command has ended: a reading of nothing would read as an idle node).
  std::vector<std::pair<std::string, double>> Read(int64_t now_monotonic_us);

 private:
  struct ProcessCounters {
    uint64_t cpu_ticks = 0;
    uint64_t read_bytes = 0;
    uint64_t write_bytes = 0;
  };
  // CPU microseconds, read and written bytes of the node's processes so far (what this meter
  // has seen of them); the memory they hold now.
  struct Totals {
    uint64_t cpu_us = 0;
    uint64_t read_bytes = 0;
    uint64_t write_bytes = 0;
    uint64_t memory_bytes = 0;
  };
  Totals ReadTotals(const std::vector<pid_t>& processes);
  std::vector<pid_t> NodeProcesses() const;

  NodeUsageSource source_;
  int cpus_ = 1;
  uint64_t machine_memory_bytes_ = 0;
  // Per process (pid, start time): its counters at the previous reading.
  std::map<std::pair<pid_t, uint64_t>, ProcessCounters> seen_;
  ProcessCounters summed_;  // every process's counters, summed by difference
  Totals baseline_;         // at construction
  Totals previous_;         // at the previous reading
  uint64_t net_rx0_ = 0, net_tx0_ = 0;
  int64_t previous_us_ = 0;
};

// Bytes received and sent through every network interface but loopback (/proc/net/dev).
std::pair<uint64_t, uint64_t> NetworkBytes();

}  // namespace air::agent
