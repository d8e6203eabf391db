// air launch's options (torchrun's flags) and the environment contract each worker gets.
//
// WorkerEnvironment is torchrun's contract (docs/launch.md; REFERENCES.md §2): RANK, LOCAL_RANK,
// WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE,
// ROLE_NAME, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS,
// TORCHELASTIC_RUN_ID, TORCHELASTIC_USE_AGENT_STORE, TORCHELASTIC_ERROR_FILE,
// TORCHELASTIC_SIGNALS_TO_HANDLE, TORCH_NCCL_ASYNC_ERROR_HANDLING, and OMP_NUM_THREADS=1 when
// it is unset and a node runs more than one worker.
// Thread safety: plain values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/env.h"
#include "base/status.h"

namespace air::launch {

struct LaunchOptions {
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int max_restarts = 0;
  std::string log_dir;  // "" = workers write to air launch's stdout/stderr
  bool standalone = false;
  std::string run_id = "none";  // TORCHELASTIC_RUN_ID (torchrun's static rendezvous: "none")
  bool no_python = false;       // run the script itself, not `python3 -u script`
  bool module = false;          // -m: `python3 -u -m script`
  double monitor_interval_s = 0.1;
  double stop_grace_s = 30;     // SIGTERM -> SIGKILL when air launch stops workers (torchrun: 30)
  double join_timeout_s = 900;  // every node's air launch must join within
  std::vector<std::string> command;  // the script (or program) and its arguments
};

// Checks the combination (names the flag and what would be valid). For --standalone it fills
// in one node, a free port on localhost and a random run id, as torchrun does.
Status ResolveLaunchOptions(Env* env, LaunchOptions& options);

// The program and arguments each worker runs.
std::vector<std::string> WorkerArgv(const LaunchOptions& options);

// The variables set for the worker with `local_rank` in attempt `restart_count`, in order, on
// top of air launch's own environment (`inherited` reads it: OMP_NUM_THREADS,
// TORCH_NCCL_ASYNC_ERROR_HANDLING).
std::vector<std::pair<std::string, std::string>> WorkerEnvironment(const LaunchOptions& options,
                                                                   int local_rank,
                                                                   int restart_count,
                                                                   const std::string& error_file,
                                                                   Env* inherited);

}  // namespace air::launch
