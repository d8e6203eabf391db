// `air version`: prints the version of this build.
#include "cli/commands.h"

namespace air::cli {

void RegisterVersionCommand(CLI::App& root, CliContext& ctx) {
  auto* cmd = root.add_subcommand("version", "print air's version");
  cmd->callback([&ctx] {
    EmitData(ctx, nlohmann::json{{"version", AIR_VERSION}}, std::string("air ") + AIR_VERSION);
  });
}

}  // namespace air::cli
