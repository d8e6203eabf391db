// The subcommands of the air executable. Each Register* function lives in its own cmd_*.cc
// file, adds one CLI11 subcommand (with its flags and callback) to the root app, and reports
// its outcome through the shared CliContext.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/context.h"

namespace air::cli {

void RegisterVersionCommand(CLI::App& root, CliContext& ctx);
void RegisterRunCommand(CLI::App& root, CliContext& ctx);
void RegisterGetCommand(CLI::App& root, CliContext& ctx);
void RegisterListCommand(CLI::App& root, CliContext& ctx);
void RegisterLogsCommand(CLI::App& root, CliContext& ctx);
void RegisterCancelCommand(CLI::App& root, CliContext& ctx);
void RegisterSuperviseCommand(CLI::App& root, CliContext& ctx);
void RegisterAgentCommand(CLI::App& root, CliContext& ctx);
void RegisterSlurmNodeCommand(CLI::App& root, CliContext& ctx);
void RegisterSecretsCommand(CLI::App& root, CliContext& ctx);
void RegisterTrainCommand(CLI::App& root, CliContext& ctx);
void RegisterGenerateCommand(CLI::App& root, CliContext& ctx);
void RegisterTokenizeCommand(CLI::App& root, CliContext& ctx);
void RegisterModelCommand(CLI::App& root, CliContext& ctx);
void RegisterLoraCommand(CLI::App& root, CliContext& ctx);
void RegisterVolumesCommand(CLI::App& root, CliContext& ctx);
void RegisterDeleteCommand(CLI::App& root, CliContext& ctx);
void RegisterGcCommand(CLI::App& root, CliContext& ctx);
void RegisterLaunchCommand(CLI::App& root, CliContext& ctx);
void RegisterServerCommand(CLI::App& root, CliContext& ctx);
void RegisterUiCommand(CLI::App& root, CliContext& ctx);

}  // namespace air::cli
