// Entry point of the air executable: global flags, subcommand dispatch, exit code.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/context.h"

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

  air::cli::RegisterVersionCommand(app, ctx);
  air::cli::RegisterRunCommand(app, ctx);
  air::cli::RegisterGetCommand(app, ctx);
  air::cli::RegisterListCommand(app, ctx);
  air::cli::RegisterLogsCommand(app, ctx);
  air::cli::RegisterCancelCommand(app, ctx);
  air::cli::RegisterSuperviseCommand(app, ctx);
  air::cli::RegisterAgentCommand(app, ctx);
  air::cli::RegisterSecretsCommand(app, ctx);
  air::cli::RegisterTrainCommand(app, ctx);
  air::cli::RegisterGenerateCommand(app, ctx);
  air::cli::RegisterTokenizeCommand(app, ctx);
  air::cli::RegisterModelCommand(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Usage errors get the same envelope as every other error when -o json was asked for.
    if (output == "json") {
      ctx.format = air::cli::OutputFormat::kJson;
      air::cli::EmitError(ctx, air::InvalidArgument(e.what()));
      return air::cli::kExitInvalid;
    }
    app.exit(e);
    return air::cli::kExitInvalid;
  }
  return ctx.exit_code;
}
