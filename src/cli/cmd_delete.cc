// `air delete RUN_ID...`: removes ended runs — their store records, logs, node directories and
// parameters — and then the snapshots and Python environments no remaining run uses
// (runtime/retention.h). A run that has not ended is refused (cancel it first) and then
// nothing is deleted. Volumes are never touched.
#include <fmt/format.h>

#include <memory>

#include "base/strings.h"
#include "cli/commands.h"
#include "cli/retention_report.h"
#include "runtime/layout.h"
#include "runtime/retention.h"
#include "runtime/run_lookup.h"

namespace air::cli {

namespace {

nlohmann::json RetentionJson(const runtime::RetentionReport& report) {
  return {{"deleted_runs", report.deleted_runs},
          {"manifests_removed", report.manifests_removed},
          {"blobs_removed", report.blobs_removed},
          {"environments_removed", report.environments_removed},
          {"environments_kept_for_old_runs", report.environments_kept_for_old_runs}};
}

std::string RetentionText(const runtime::RetentionReport& report) {
  std::vector<std::string> ids;
  for (int64_t id : report.deleted_runs) ids.push_back(std::to_string(id));
  std::string text =
      report.deleted_runs.empty()
          ? "No runs deleted"
          : fmt::format("Deleted run{} {}", ids.size() == 1 ? "" : "s", Join(ids, ", "));
  text += fmt::format("; removed {} snapshot manifest(s), {} blob(s), {} environment(s)",
                      report.manifests_removed, report.blobs_removed,
                      report.environments_removed.size());
  if (report.environments_kept_for_old_runs) {
    text += " (environments kept: a live run started before air recorded environments)";
  }
  return text;
}

}  // namespace

void RunRetention(CliContext& ctx, const std::function<Result<runtime::RetentionReport>(
                                       store::Store*, const runtime::Layout&)>& operation) {
  Status status = [&]() -> Status {
    AIR_ASSIGN_OR_RETURN(std::string air_home, AirHome(ctx));
    runtime::Layout layout(air_home);
    AIR_ASSIGN_OR_RETURN(auto store, runtime::OpenExistingStore(layout, ctx.env));
    AIR_ASSIGN_OR_RETURN(runtime::RetentionReport report, operation(store.get(), layout));
    EmitData(ctx, RetentionJson(report), RetentionText(report));
    return Status::Ok();
  }();
  if (!status.ok()) EmitError(ctx, status);
}

void RegisterDeleteCommand(CLI::App& root, CliContext& ctx) {
  auto ids = std::make_shared<std::vector<std::string>>();
  auto* cmd = root.add_subcommand(
      "delete", "delete ended runs with their logs, and snapshots/environments nothing else uses");
  cmd->add_option("RUN_ID", *ids, "the runs to delete")->required();
  cmd->callback([&ctx, ids] {
    std::vector<int64_t> run_ids;
    for (const auto& text : *ids) {
      auto id = runtime::ParseRunId(text);
      if (!id.ok()) return EmitError(ctx, id.status());
      run_ids.push_back(*id);
    }
    RunRetention(ctx, [&](store::Store* store, const runtime::Layout& layout) {
      return runtime::DeleteRuns(store, layout, run_ids, ctx.env);
    });
  });
}

}  // namespace air::cli
