// `air launch` as an srun task (docs/slurm.md, "Under srun without air's runtime"): for users who
// write their own sbatch scripts, `srun --ntasks-per-node=1 air launch --nproc-per-node P
// train.py` needs no per-node flags. One air launch per node, its place read from Slurm's task
// environment:
//   --nnodes       SLURM_STEP_NUM_NODES (else SLURM_NNODES)
//   --node-rank    SLURM_NODEID
//   --master-addr  the step's first host (`scontrol show hostnames $SLURM_STEP_NODELIST`)
// (MASTER_PORT keeps torchrun's default unless given.) `air train` reads SLURM_PROCID and the
// rest itself (engine/parallel/dist_env.h).
// Thread safety: reads the environment; runs scontrol.
#pragma once

#include <optional>
#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air::backends::slurm {

struct SrunNodePlace {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;
};

// nullopt outside an srun step (SLURM_STEP_ID unset). An error when the step runs more than one
// task per node (each would start the node's workers again) or the variables are malformed,
// naming the variables and the srun option that fixes it.
Result<std::optional<SrunNodePlace>> ReadSrunNodePlace(Env* env);

}  // namespace air::backends::slurm
