// The torchrun variables of a process started directly by `srun` (a user's own sbatch script
// running `srun air train ...` or `srun air launch ...`, no torchrun): Slurm describes each task
// with SLURM_* variables; this maps them, in one place, to the names air's trainer and launcher
// read (docs/slurm.md):
//   SLURM_PROCID -> RANK               SLURM_LOCALID -> LOCAL_RANK
//   SLURM_NTASKS -> WORLD_SIZE         SLURM_NODEID  -> NODE_RANK, GROUP_RANK
//   SLURM_NNODES -> NUM_NODES          tasks on this node (SLURM_TASKS_PER_NODE) ->
//   LOCAL_WORLD_SIZE MASTER_ADDR: kept when set, else SLURM_LAUNCH_NODE_IPADDR (the node srun ran
//   on: the batch host, the allocation's first node); MASTER_PORT: kept when set, else 10000 + job
//   id % 50000 (the same on every task of the job).
// A variable torchrun (or the user) already set wins: the mapping only fills in what is missing,
// so the same binary runs under torchrun, under air's backends and under plain srun.
// Written apart from the launcher's own environment parsing so it can be folded into it.
// Thread safety: pure functions.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace air::engine::parallel {

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The torchrun variables to set (name, value), empty when not under srun (no SLURM_PROCID) or
// when every one is already set. InvalidArgument names a malformed SLURM_* variable.
Result<std::vector<std::pair<std::string, std::string>>> TorchrunVariablesFromSlurm(
    const EnvLookup& lookup);

// SLURM_TASKS_PER_NODE ("2(x3),1") -> the task count of node `node_id`; nullopt if malformed.
std::optional<int> TasksOnNode(const std::string& tasks_per_node, int node_id);

}  // namespace air::engine::parallel
