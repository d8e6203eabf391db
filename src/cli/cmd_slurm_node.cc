// `air slurm-node ATTEMPT_DIR` (internal): the node entry the Slurm backend's srun step runs on
// every node (backends/slurm/node_entry.h).
#include <memory>

#include "backends/slurm/node_entry.h"
#include "cli/commands.h"

namespace air::cli {

void RegisterSlurmNodeCommand(CLI::App& root, CliContext& ctx) {
  auto dir = std::make_shared<std::string>();
  auto* cmd =
      root.add_subcommand("slurm-node", "internal: one node of a Slurm job (started by srun)");
  cmd->group("");  // hidden from help
  cmd->add_option("ATTEMPT_DIR", *dir)->required();
  cmd->callback([&ctx, dir] { ctx.exit_code = backends::slurm::SlurmNodeMain(*dir, ctx.env); });
}

}  // namespace air::cli
