// `air get RUN_ID` (and the seed's form `air get run RUN_ID`): a run's state, experiment, nodes,
// attempts with each node's outcome, duration, failure summary, and each node's latest system
// metrics sample.
#include <memory>

#include "cli/commands.h"
#include "runtime/layout.h"
#include "runtime/run_lookup.h"
#include "runtime/run_progress.h"
#include "runtime/run_view.h"
#include "runtime/system_metrics_view.h"

namespace air::cli {
namespace {

Status GetRun(CliContext& ctx, const std::vector<std::string>& args) {
  std::string id_text;
  if (args.size() == 1) {
    id_text = args[0];
  } else if (args.size() == 2 && args[0] == "run") {
    id_text = args[1];
  } else {
    return InvalidArgument("usage: air get RUN_ID, or air get run RUN_ID");
  }
  AIR_ASSIGN_OR_RETURN(int64_t run_id, runtime::ParseRunId(id_text));
  AIR_ASSIGN_OR_RETURN(std::string air_home, AirHome(ctx));
  AIR_ASSIGN_OR_RETURN(runtime::Layout layout, runtime::ResolveLayout(air_home, ctx.env));
  AIR_ASSIGN_OR_RETURN(auto store, runtime::OpenExistingStore(layout, ctx.env));
  AIR_ASSIGN_OR_RETURN(store::RunRecord run,
                       runtime::LoadRun(store.get(), layout, run_id, ctx.env));
  AIR_ASSIGN_OR_RETURN(runtime::RunDetails details, runtime::LoadRunDetails(store.get(), run));
  int64_t now = ctx.env->NowMicros();
  if (auto progress = runtime::LoadRunProgress(store.get(), layout, run, ctx.env, now);
      progress.ok()) {
    details.progress = std::move(*progress);
  }
  nlohmann::json data = runtime::RunDetailsJson(details, now);
  std::string text = runtime::RunDetailsText(details, now);
  // The latest system metrics sample of each node, before the closing `logs:` hint.
  const auto system = runtime::LoadLatestSystemSamples(layout, details, ctx.env);
  data["system_metrics"] = runtime::LatestSystemSamplesJson(system);
  const size_t logs_hint = text.rfind("  logs: ");
  text.insert(logs_hint == std::string::npos ? text.size() : logs_hint,
              runtime::LatestSystemSamplesText(system));
  EmitData(ctx, data, text);
  return Status::Ok();
}

}  // namespace

void RegisterGetCommand(CLI::App& root, CliContext& ctx) {
  auto args = std::make_shared<std::vector<std::string>>();
  auto* cmd = root.add_subcommand("get", "show a run: state, attempts, nodes, failure summary");
  cmd->add_option("args", *args, "RUN_ID (or: run RUN_ID)")->required()->expected(1, 2);
  cmd->callback([&ctx, args] {
    Status status = GetRun(ctx, *args);
    if (!status.ok()) EmitError(ctx, status);
  });
}

}  // namespace air::cli
