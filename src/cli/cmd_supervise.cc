// `air supervise RUN_ID --air-home DIR [--adopt-from PID]` (internal): the detached per-run
// supervisor that `air run` starts, or that reconcile starts to adopt a run whose supervisor died
// while its attempt lived on in a scheduler (runtime/supervisor.h). Its stdout/stderr go to the
// run's supervisor.log.
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
    int64_t adopt_from = 0;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = root.add_subcommand("supervise", "internal: drive one run (started by air run)");
  cmd->group("");  // hidden from help
  cmd->add_option("RUN_ID", flags->run_id)->required();
  cmd->add_option("--air-home", flags->air_home, "AIR_HOME of the run");
  cmd->add_option("--adopt-from", flags->adopt_from,
                  "adopt the run whose supervisor (this pid) died while its attempt lived on");
  cmd->callback([&ctx, flags] {
    auto run_id = runtime::ParseRunId(flags->run_id);
    if (!run_id.ok()) {
      EmitError(ctx, run_id.status());
      return;
    }
    runtime::SupervisorOptions options;
    if (flags->air_home.empty()) {
      auto air_home = AirHome(ctx);
      if (!air_home.ok()) return EmitError(ctx, air_home.status());
      options.air_home = *air_home;
    } else {
      options.air_home = flags->air_home;
    }
    options.adopt_from_pid = flags->adopt_from;
    Status status = runtime::SuperviseRun(*run_id, options, ctx.env);
    if (!status.ok()) {
      AIR_ERROR("supervising run {}: {}", *run_id, status.ToString());
      EmitError(ctx, status);
    }
  });
}

}  // namespace air::cli
