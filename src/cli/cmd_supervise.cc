// `air supervise RUN_ID --air-home DIR` (internal): the detached per-run supervisor that `air run`
// starts (runtime/supervisor.h). Its stdout/stderr go to the run's supervisor.log.
#include <memory>

#include "base/log.h"
#include "cli/commands.h"
#include "runtime/run_lookup.h"
#include "runtime/supervisor.h"

namespace air::cli {

void RegisterSuperviseCommand(CLI::App& root, CliContext& ctx) {
  struct Flags {
    std::string run_id;
    std::string air_home;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = root.add_subcommand("supervise", "internal: drive one run (started by air run)");
  cmd->group("");  // hidden from help
  cmd->add_option("RUN_ID", flags->run_id)->required();
  cmd->add_option("--air-home", flags->air_home, "AIR_HOME of the run");
  cmd->callback([&ctx, flags] {
    auto run_id = runtime::ParseRunId(flags->run_id);
    if (!run_id.ok()) {
      EmitError(ctx, run_id.status());
      return;
    }
    runtime::SupervisorOptions options;
    options.air_home = flags->air_home.empty() ? AirHome(ctx) : flags->air_home;
    Status status = runtime::SuperviseRun(*run_id, options, ctx.env);
    if (!status.ok()) {
      AIR_ERROR("supervising run {}: {}", *run_id, status.ToString());
      EmitError(ctx, status);
    }
  });
}

}  // namespace air::cli
