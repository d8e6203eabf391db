// SlurmBackend: one attempt = one Slurm batch job on a real cluster (docs/slurm.md).
//
// Launch writes each node's launch file (and, with secrets, a 0600 secrets file) into the
// attempt's directory on the shared root, writes the batch script (batch_script.h) and submits
// it with sbatch. The job's one srun step starts `air slurm-node` on every node (node_entry.h),
// which runs the same node agent as the local backend, so the reports, logs and the node
// environment are the same. Poll reads the agents' reports from the shared root and, at most
// once a second, the job's state from `scontrol show job`: PENDING (with Slurm's reason) while
// queued; once the job has ended, a node without an exit report is lost with what Slurm says
// (NODE_FAIL names the node that failed, TIMEOUT sets SchedulerStatus::timed_out). StopAll and
// KillAll are scancel (SIGTERM to every step, SIGKILL after the cluster's KillWait); the
// destructor cancels a job that is still queued or running and removes leftover secrets files.
// The job id is kept in the attempt directory (slurm_job_id): the job outlives a supervisor that
// dies, and the next supervisor adopts it (Attach) so the run ends with the job's real state.
// Thread safety: one thread (the run's supervisor); not copyable.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cluster_backend.h"
#include "backends/slurm/slurm_cli.h"
#include "backends/slurm/slurm_config.h"
#include "base/env.h"

namespace air::backends {

class SlurmBackend final : public ClusterBackend {
 public:
  // Checks, without submitting anything, that Slurm's commands are installed, the controller
  // answers, the partition exists (or there is a default one), and `data_root` is writable; then
  // reports what the partition offers (nodes, CPUs and GPUs per node).
  static Result<ClusterCapabilities> DescribeCapabilities(const SlurmConfig& config,
                                                          const std::string& data_root, Env* env);
  // For a run whose supervisor died: "Slurm job 42 RUNNING" while Slurm still knows the job of
  // the attempt in `attempt_dir` (any state: one that ended meanwhile is adopted to read how it
  // ended), "" when none was submitted, kNotFound naming the job when Slurm has purged it.
  static Result<std::string> DescribeDetachedAttempt(const std::string& attempt_dir, Env* env);
  static Result<std::unique_ptr<SlurmBackend>> Create(const SlurmConfig& config,
                                                      std::string air_binary, Env* env);
  ~SlurmBackend() override;
  SlurmBackend(const SlurmBackend&) = delete;
  SlurmBackend& operator=(const SlurmBackend&) = delete;

  const ClusterCapabilities& Capabilities() const override { return capabilities_; }
  Status Launch(const AttemptToLaunch& attempt) override;
  // Adopts the job whose id Launch kept in the attempt directory (slurm_job_id).
  Status Attach(const AttemptToLaunch& attempt) override;
  Status StopAll() override;
  Status KillAll() override;
  Result<std::vector<NodeStatus>> Poll(int64_t wait_micros) override;
  SchedulerStatus Scheduler() const override { return scheduler_; }

  const std::string& job_id() const { return job_id_; }

 private:
  struct Node {
    int rank = 0;
    std::string started_path;
    std::string exit_path;
    std::string secrets_path;  // "" without secrets
    std::string log_path;
    int64_t reported_us = 0;  // monotonic: when its exit report was first read
    bool culprit = false;     // the node Slurm reports failed (NODE_FAIL)
    NodeStatus status;
  };

  SlurmBackend(const SlurmConfig& config, std::string air_binary, Env* env);
  static std::string JobIdPath(const std::string& attempt_dir);
  Node NodeOf(const NodeToLaunch& node) const;
  Status RefreshJob();
  void EndLostNodes();
  void EndFailedNode(const std::string& comment);
  std::string FailedNodeNames();
  void RemoveSecretFiles();

  SlurmConfig config_;
  std::string air_binary_;
  Env* env_;
  ClusterCapabilities capabilities_;
  std::string job_id_;
  std::string attempt_dir_;
  std::vector<Node> nodes_;
  std::vector<std::string> hostnames_;  // by rank, once the job runs
  std::optional<slurm::JobInfo> job_;
  bool job_gone_ = false;  // Slurm no longer knows the job
  bool stop_requested_ = false;
  int64_t last_query_us_ = 0;
  int64_t ended_seen_us_ = 0;  // when the job was first seen ended
  SchedulerStatus scheduler_;
};

}  // namespace air::backends
