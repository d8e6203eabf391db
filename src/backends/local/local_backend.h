// LocalBackend: the embedded default. Simulates N nodes on this machine: one `air agent` child
// process per node, each started with the parent-death signal SIGTERM (if the supervisor dies,
// its nodes stop), its own disjoint share of the CPUs air may use (as a real node has its own
// cores: SplitCpusAmongNodes) and, on a host with GPUs, its own disjoint CUDA_VISIBLE_DEVICES.
// Exits are
// noticed at once through SIGCHLD (a signalfd); the start and exit reports are read from the
// run directory.
//
// The supervisor process that owns a LocalBackend has SIGCHLD blocked (it is delivered through
// the signalfd) and is a child subreaper, so processes orphaned by a dying agent come back to it
// and KillAll can still find them.
// Thread safety: one thread (the supervisor's); not copyable.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/cluster_backend.h"
#include "base/env.h"

namespace air::backends {

// GPUs visible on this host (from /proc/driver/nvidia/gpus, else /dev/nvidiaN); 0 without.
int CountLocalGpus();

// The CPUs of each of `nodes` simulated nodes: `cpus` (the supervisor's allowed CPUs) cut into
// `nodes` contiguous, disjoint parts as equal as they can be (the first parts take one more when
// they do not divide). Empty (no binding: every node may use every CPU) for one node, or when
// there are fewer CPUs than nodes.
std::vector<std::vector<int>> SplitCpusAmongNodes(const std::vector<int>& cpus, int nodes);

class LocalBackend final : public ClusterBackend {
 public:
  // What the local backend offers on this host (no side effects: for checks at submit).
  static ClusterCapabilities DescribeCapabilities(Env* env);
  // One backend instance drives one attempt. `agent_binary` is the air executable that
  // provides `air agent`.
  static Result<std::unique_ptr<LocalBackend>> Create(Env* env, std::string agent_binary);
  ~LocalBackend() override;

  const ClusterCapabilities& Capabilities() const override { return capabilities_; }
  Status Launch(const AttemptToLaunch& attempt) override;
  Status StopAll() override;
  Status KillAll() override;
  Result<std::vector<NodeStatus>> Poll(int64_t wait_micros) override;

 private:
  struct Node {
    int rank = 0;
    pid_t agent_pid = -1;
    bool reaped = false;
    int wait_status = 0;
    std::string started_path;
    std::string exit_path;
    std::string tracker_path;
    NodeStatus status;
  };

  LocalBackend(Env* env, std::string agent_binary, int sigchld_fd, ClusterCapabilities caps);
  Result<pid_t> SpawnAgent(const NodeToLaunch& node, const std::string& cuda_devices,
                           std::vector<int> cpus);
  void ReapAgents();
  void Refresh(Node& node);
  // Kills every process of the node through its tracker file (agent/process_tracker.h).
  Status KillNodeProcesses(Node& node);

  Env* env_;
  std::string agent_binary_;
  int sigchld_fd_;
  ClusterCapabilities capabilities_;
  std::vector<Node> nodes_;
};

}  // namespace air::backends
