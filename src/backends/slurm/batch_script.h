// One attempt as one Slurm batch job: the sbatch command line and the batch script (pure
// functions, unit-tested). The mapping (docs/slurm.md):
//   compute.num_nodes            --nodes=N --ntasks-per-node=1 (one `air agent` per node)
//   GPU shapes (GPU_8xH100)      --gres=gpu:8
//   CPU shapes (CPU_4)           --cpus-per-task=4 (the node's workers)
//   timeout_minutes              --time (Slurm enforces it: TIMEOUT)
//   slurm.partition/account/qos  --partition/--account/--qos; slurm.sbatch_options appended
// The script runs one srun step that starts `air slurm-node ATTEMPT_DIR` on every node; each
// picks its launch file by SLURM_NODEID (= NODE_RANK). MASTER_ADDR is the first host of the
// allocation (`scontrol show hostnames`), passed to the nodes as AIR_SLURM_MASTER_ADDR.
// Neither the script nor the command line holds a secret value (they reach the nodes in 0600
// files on the shared root, backends/slurm/node_entry.h).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/slurm/slurm_config.h"

namespace air::backends::slurm {

struct JobRequest {
  int64_t run_id = 0;
  int attempt = 0;
  int nodes = 1;
  int gpus_per_node = 0;  // > 0: --gres=gpu:N
  int cpus_per_node = 0;  // > 0: --cpus-per-task=N
  std::optional<int64_t> time_limit_seconds;
  std::string attempt_dir;  // on the shared root: launch files, reports, the job's output
  std::string air_binary;   // the air executable the nodes run
  std::vector<std::string> excluded_hosts;  // --exclude: hosts an earlier attempt lost
  SlurmConfig config;
};

// "air-<run>-<attempt>": how air's jobs are found in squeue.
std::string JobName(int64_t run_id, int attempt);

// Slurm's --time value for a limit in seconds: whole minutes, rounded up (Slurm's granularity;
// its controller checks limits about every 30 s, so a job ends 0-30 s after its limit).
std::string FormatTimeLimit(int64_t seconds);

// The batch script's text.
std::string BatchScript(const JobRequest& request);

// sbatch's argv (argv[0] = "sbatch") for the script at `script_path`.
std::vector<std::string> SbatchArgv(const JobRequest& request, const std::string& script_path);

// 'text' for a POSIX shell.
std::string ShellQuote(const std::string& text);

}  // namespace air::backends::slurm
