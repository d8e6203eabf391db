// Where this process stands in a distributed job, read from the launcher's environment: the
// torchrun contract (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
// set by torchrun, air launch, or by hand), or Slurm's when run as an srun task (SLURM_PROCID,
// SLURM_LOCALID, SLURM_NTASKS, SLURM_NODEID, SLURM_STEP_NUM_NODES), or air run's node
// environment when the command is its node's one worker (NODE_RANK, NUM_NODES,
// LOCAL_WORLD_SIZE=1). Inconsistent or malformed
// values are an error naming the variables and what would be valid; nothing set at all is a
// single process (world size 1).
// Thread safety: pure functions over an Env.
#pragma once

#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air::engine::parallel {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;        // GROUP_RANK (torchrun), SLURM_NODEID, else rank / local_world_size
  std::string master_addr;  // "" when world_size == 1 and none was given
  int master_port = 0;
  // TORCHELASTIC_USE_AGENT_STORE=True: the launcher hosts the store at MASTER_ADDR:MASTER_PORT
  // and every rank joins it as a client; otherwise rank 0 hosts it.
  bool agent_store = false;
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT (0 when unset)
  std::string launcher;   // "torchrun" (the torchrun variables), "slurm", "air run", "none"
};

// Reads and validates the variables, in this order: RANK set -> the torchrun variables; an srun
// task (SLURM_STEP_ID) -> Slurm's (a WORLD_SIZE that contradicts SLURM_NTASKS is an error);
// NODE_RANK and NUM_NODES -> air run's node (more than one worker per node without RANK is an
// error pointing at air launch); else one process (WORLD_SIZE > 1 without RANK is an error).
Result<DistEnv> ReadDistEnv(Env* env);

// "rank 1 of 4 (local 1 of 2, node 0), store at 127.0.0.1:29500 hosted by rank 0".
std::string DescribeDistEnv(const DistEnv& dist);

}  // namespace air::engine::parallel
