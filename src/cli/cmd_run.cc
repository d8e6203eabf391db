// `air run -f FILE [--dry-run] [--watch] [--override FIELD=VALUE]...`: validate a workload
// spec and (with --dry-run) print the resolved plan, or submit it.
#include "cli/commands.h"

namespace air::cli {

void RegisterRunCommand(CLI::App& root, CliContext& ctx) {
  auto* cmd = root.add_subcommand("run", "validate and submit a workload YAML");
  cmd->callback([&ctx] { EmitError(ctx, Unimplemented("air run is being built")); });
}

}  // namespace air::cli
