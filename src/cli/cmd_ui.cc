// `air ui`: makes sure AIR_HOME's server runs (starting it detached) and prints the web UI's URL.
#include <fmt/format.h>

#include "cli/commands.h"
#include "runtime/tracking_link.h"

namespace air::cli {

void RegisterUiCommand(CLI::App& root, CliContext& ctx) {
  auto* cmd = root.add_subcommand("ui", "print the web UI's URL (starts the air server if needed)");
  cmd->callback([&ctx] {
    auto url = runtime::EnsureTrackingServer(AirHome(ctx), ctx.env);
    if (!url.ok()) return EmitError(ctx, url.status());
    EmitData(ctx, {{"url", *url + "/"}}, *url + "/");
  });
}

}  // namespace air::cli
