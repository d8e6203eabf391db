// The subcommands of the air executable. Each Register* function lives in its own cmd_*.cc
// file, adds one CLI11 subcommand (with its flags and callback) to the root app, and reports
// its outcome through the shared CliContext.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/context.h"

namespace air::cli {

void RegisterVersionCommand(CLI::App& root, CliContext& ctx);
void RegisterRunCommand(CLI::App& root, CliContext& ctx);

}  // namespace air::cli
