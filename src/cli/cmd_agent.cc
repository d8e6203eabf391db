// `air agent LAUNCH_FILE` (internal): the node agent a backend starts once per node
// (agent/agent.h). Exit code 0 when the command exited 0 on its own.
#include <memory>

#include "agent/agent.h"
#include "cli/commands.h"

namespace air::cli {

void RegisterAgentCommand(CLI::App& root, CliContext& ctx) {
  auto launch_file = std::make_shared<std::string>();
  auto* cmd = root.add_subcommand("agent", "internal: run one node's command (started by air)");
  cmd->group("");  // hidden from help
  cmd->add_option("LAUNCH_FILE", *launch_file)->required();
  cmd->callback([&ctx, launch_file] { ctx.exit_code = agent::AgentMain(*launch_file, ctx.env); });
}

}  // namespace air::cli
