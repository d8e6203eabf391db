// ClusterBackend: how an attempt's nodes are started, signalled and watched. The runtime drives
// every backend the same way (launch all nodes, poll, stop all); everything specific to one kind of
// cluster stays in its folder (backends/local/, backends/slurm/). A backend declares what
// it can do up front (ClusterCapabilities) so a spec it cannot run is refused at submit, not
// discovered by failure.
//
// Each node runs `air agent LAUNCH_FILE` (agent/agent.h), which runs the command and writes the
// start and exit reports the backend reads. Secret values travel only in `secret_env`, never
// in argv, launch files or logs: the local backend places them in the agent's environment; the
// Slurm backend in a 0600 file per node on the shared root that the node reads and deletes
// before its command starts (Slurm never sees them; docs/slurm.md).
// Thread safety: a backend instance is used by one thread (the run's supervisor).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/node_launch.h"
#include "base/status.h"

namespace air::backends {

struct ClusterCapabilities {
  std::string name;               // "local", "slurm (partition debug)": for messages
  int max_nodes = 0;              // 0: no limit
  int gpus_available = 0;         // GPUs the backend can hand out to nodes
  int max_gpus_per_node = -1;     // -1: not limited per node (only gpus_available counts)
  int max_cpus_per_node = 0;      // 0: not checked; else the most CPUs one node can give
  bool docker_images = false;     // can run environment.docker_image
  bool shared_filesystem = true;  // nodes see the data root (snapshots, logs) directly
  // The backend's scheduler enforces AttemptToLaunch::time_limit_seconds itself (from when the
  // nodes start, not while queued) and reports it in SchedulerStatus::timed_out; the runtime
  // then arms no deadline of its own.
  bool enforces_time_limit = false;
  // An attempt lives on in the backend's scheduler when the supervisor dies (a Slurm job):
  // a new supervisor adopts it with ClusterBackend::Attach instead of the run being given up.
  bool attempts_outlive_supervisor = false;
  // Host GPUs the runtime leases to runs (runtime/gpu_lease.h) before each attempt; empty where
  // the backend has none or allocates them itself.
  std::vector<std::string> gpu_devices;
};

struct NodeToLaunch {
  agent::NodeLaunch launch;  // written to launch_path for the agent
  std::string launch_path;
  std::vector<std::pair<std::string, std::string>> secret_env;  // NAME -> value
};

struct AttemptToLaunch {
  int64_t run_id = 0;
  int attempt = 0;
  int gpus_per_node = 0;                      // > 0: each node gets its own disjoint set of GPUs
  int cpus_per_node = 0;                      // > 0 for CPU shapes: the workers of one node
  std::optional<int64_t> time_limit_seconds;  // timeout_minutes, for enforces_time_limit
  std::string attempt_dir;                    // the attempt's directory on the data root
  // The leased devices, gpus_per_node per node in node order (set by the runtime when the
  // backend lists gpu_devices); empty: the backend picks.
  std::vector<std::string> devices;
  std::vector<NodeToLaunch> nodes;
  // Hosts an earlier attempt lost (NodeStatus::node_lost): a backend that chooses hosts never
  // places a node there again (Slurm: sbatch --exclude).
  std::vector<std::string> excluded_hosts;
};

// What a scheduler says about the attempt as a whole (backends that queue; empty for local).
struct SchedulerStatus {
  std::string queued_reason;  // non-empty while the attempt waits in the queue ("Resources")
  std::string note;           // one line ("Slurm job 42 RUNNING on node[1-2]"); an event when it
                              // changes
  bool timed_out = false;     // the scheduler ended the attempt at its time limit
};

enum class NodePhase { kStarting, kRunning, kEnded };

struct NodeStatus {
  int node_rank = 0;
  NodePhase phase = NodePhase::kStarting;
  std::optional<agent::NodeStarted> started;
  std::optional<agent::NodeExitReport> exit;  // set when kEnded and the agent reported
  std::string lost_reason;                    // kEnded without a report: what happened to the agent
  // kEnded without a report because the node itself is gone (its agent or its host died, Slurm
  // reports NODE_FAIL), not because air stopped it: elastic retries continue without it.
  bool node_lost = false;
  std::string host;  // the machine it ran on, where the backend knows it ("" otherwise)
};

class ClusterBackend {
 public:
  virtual ~ClusterBackend() = default;

  virtual const ClusterCapabilities& Capabilities() const = 0;

  // Starts every node of the attempt. If a node cannot be started, the ones already started
  // are killed and the error names the node.
  virtual Status Launch(const AttemptToLaunch& attempt) = 0;

  // Adopts an attempt that an earlier instance launched (its supervisor died) instead of
  // launching it: `attempt` is the same plan (paths, node ranks) without launch files being
  // written again. Only for attempts_outlive_supervisor; kNotFound when nothing can be adopted.
  virtual Status Attach(const AttemptToLaunch& attempt) {
    (void)attempt;
    return Unimplemented(Capabilities().name + " attempts end with their supervisor");
  }

  // Asks every node still running to stop: its agent sends SIGTERM to the command's process
  // group and SIGKILL after the grace period.
  virtual Status StopAll() = 0;

  // Kills every process of the attempt now (agents and their process groups): the backstop
  // when agents do not finish stopping in time.
  virtual Status KillAll() = 0;

  // Waits up to `wait_micros` for a node to change, then reports every node of the attempt.
  virtual Result<std::vector<NodeStatus>> Poll(int64_t wait_micros) = 0;

  // The scheduler's view as of the last Poll.
  virtual SchedulerStatus Scheduler() const { return {}; }
};

}  // namespace air::backends
