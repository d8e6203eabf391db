// Entry point of the air executable: global flags, subcommand dispatch, exit code.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/context.h"
#include "cli/usage_error.h"

namespace {

// True when the command line asks for -o json / --output json (even if parsing failed).
bool WantsJson(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "-o" || arg == "--output") && std::string(argv[i + 1]) == "json") return true;
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--output=json" || arg == "-ojson") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  air::cli::CliContext ctx;
  ctx.env = air::DefaultEnv();

  CLI::App app{"air: run and fine-tune LLM workloads on many nodes"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags (-o) may follow the subcommand
  std::string output = "text";
  app.add_option("-o,--output", output, "output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->default_str("text");
  app.parse_complete_callback([&] {
    ctx.format = output == "json" ? air::cli::OutputFormat::kJson : air::cli::OutputFormat::kText;
  });

  app.set_version_flag("--version", std::string("air ") + AIR_VERSION, "print air's version");
  air::cli::RegisterVersionCommand(app, ctx);
  air::cli::RegisterRunCommand(app, ctx);
  air::cli::RegisterGetCommand(app, ctx);
  air::cli::RegisterListCommand(app, ctx);
  air::cli::RegisterLogsCommand(app, ctx);
  air::cli::RegisterCancelCommand(app, ctx);
  air::cli::RegisterSuperviseCommand(app, ctx);
  air::cli::RegisterAgentCommand(app, ctx);
  air::cli::RegisterSlurmNodeCommand(app, ctx);
  air::cli::RegisterSecretsCommand(app, ctx);
  air::cli::RegisterTrainCommand(app, ctx);
  air::cli::RegisterGenerateCommand(app, ctx);
  air::cli::RegisterTokenizeCommand(app, ctx);
  air::cli::RegisterModelCommand(app, ctx);
  air::cli::RegisterLoraCommand(app, ctx);
  air::cli::RegisterVolumesCommand(app, ctx);
  air::cli::RegisterDeleteCommand(app, ctx);
  air::cli::RegisterGcCommand(app, ctx);
  air::cli::RegisterLaunchCommand(app, ctx);
  air::cli::RegisterServerCommand(app, ctx);
  air::cli::RegisterUiCommand(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    air::cli::UsageError usage = air::cli::DescribeUsageError(app, argc, argv, e);
    // Usage errors get the same envelope as every other error when -o json was asked for.
    if (output == "json" || WantsJson(argc, argv)) {
      ctx.format = air::cli::OutputFormat::kJson;
      air::cli::EmitError(ctx, air::InvalidArgument(usage.message), {{"help", usage.help_command}});
      return air::cli::kExitInvalid;
    }
    std::cerr << "error: " << usage.message << "\nRun '" << usage.help_command << "'"
              << (usage.help_command == "air --help" ? " for the list of commands.\n"
                                                     : " for its usage.\n");
    return air::cli::kExitInvalid;
  } catch (const std::exception& e) {
    // Commands report errors as values; an exception reaching here is a bug (or memory
    // exhaustion). Report it in the usual form instead of aborting.
    air::cli::EmitError(ctx, air::Internal(std::string("unexpected error: ") + e.what() +
                                           " (please report this as a bug in air)"));
    return air::cli::kExitFailure;
  }
  return ctx.exit_code;
}
