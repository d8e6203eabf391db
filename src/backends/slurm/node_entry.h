// `air slurm-node ATTEMPT_DIR` (internal): what the Slurm backend's srun step runs on every
// node of the allocation. It first checks that it can write ATTEMPT_DIR (the shared root); a
// node that cannot names itself and the path in the job's Comment (kNodeErrorPrefix), where the
// supervisor finds it, and exits 2. It then picks the node's launch file by SLURM_NODEID (NODE_RANK
// = SLURM_NODEID), reads and deletes the node's 0600 secrets file (placing the values in its own
// environment, where the agent finds them, as under the local backend), sets MASTER_ADDR to the
// allocation's first host (AIR_SLURM_MASTER_ADDR, from the batch script), and runs the node
// agent (agent/agent.h).
// Thread safety: call from the process's main thread only (it changes the environment).
#pragma once

#include <string>

#include "base/env.h"

namespace air::backends::slurm {

// How a node that cannot write the shared root says so in the job's Comment ("air-node-error:
// node 1 (node2) cannot write the shared root: PATH: ..."); SlurmBackend reads it.
inline constexpr char kNodeErrorPrefix[] = "air-node-error: ";

// Returns the process exit code (as `air agent`: 0 when the command exited 0 on its own).
int SlurmNodeMain(const std::string& attempt_dir, Env* env);

// The secrets file of one node in an attempt directory (written by the backend).
std::string NodeSecretsPath(const std::string& attempt_dir, int node_rank);

}  // namespace air::backends::slurm
