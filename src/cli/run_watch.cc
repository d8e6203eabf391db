// Live streaming of a run's node log and its final outcome.
#include "cli/run_watch.h"

#include <fmt/format.h>

#include "agent/log_format.h"
#include "runtime/layout.h"
#include "runtime/run_lookup.h"
#include "runtime/run_view.h"
#include "runtime/watch.h"

namespace air::cli {

Status WatchAndReport(CliContext& ctx, const WatchRequest& request) {
  AIR_ASSIGN_OR_RETURN(std::string air_home, AirHome(ctx));
  AIR_ASSIGN_OR_RETURN(runtime::Layout layout, runtime::ResolveLayout(air_home, ctx.env));
  runtime::WatchOptions options;
  options.node = request.node;
  options.attempt = request.attempt;
  options.start_lines = request.start_lines;
  options.on_line = [&](int attempt, const std::string& line) {
    if (ctx.json()) {
      nlohmann::json data = {
          {"run_id", request.run_id}, {"attempt", attempt}, {"node", request.node}};
      if (auto record = agent::ParseLogLine(line)) {
        data["ts"] = record->timestamp;
        data["stream"] = record->stream;
        data["text"] = record->text;
      } else {
        data["stream"] = attempt < 0 ? "setup" : "raw";
        data["text"] = line;
      }
      // A worker's output may hold bytes that are not UTF-8: JsonLine shows them as U+FFFD.
      *ctx.out << JsonLine(Envelope(ctx, data)) << "\n" << std::flush;
    } else {
      *ctx.out << runtime::RenderLogLine(line, request.timestamps) << "\n" << std::flush;
    }
  };
  options.on_attempt = [&](int attempt) {
    if (!ctx.json() && attempt > 0) {
      *ctx.err << fmt::format("[air] run {}: attempt {} started; streaming node {}\n",
                              request.run_id, attempt, request.node)
               << std::flush;
    }
  };
  AIR_ASSIGN_OR_RETURN(store::RunRecord run,
                       runtime::WatchRun(layout, request.run_id, options, ctx.env));
  if (!request.emit_final) return Status::Ok();
  AIR_ASSIGN_OR_RETURN(auto store, runtime::OpenExistingStore(layout, ctx.env));
  AIR_ASSIGN_OR_RETURN(runtime::RunDetails details, runtime::LoadRunDetails(store.get(), run));
  const int64_t now = ctx.env->NowMicros();
  if (run.state == store::RunState::kSucceeded) {
    if (ctx.json()) {
      EmitData(ctx, runtime::RunDetailsJson(details, now), "");
    } else {
      *ctx.err << fmt::format("[air] run {} SUCCEEDED in {}\n", run.id,
                              runtime::FormatDuration(run.ended_us.value_or(now) -
                                                      run.started_us.value_or(run.created_us)));
      ctx.exit_code = kExitOk;
    }
    return Status::Ok();
  }
  std::string message = fmt::format("run {} ended {}", run.id, store::RunStateName(run.state));
  if (!run.failure_summary.empty()) message += ": " + run.failure_summary;
  EmitError(ctx, FailedPrecondition(message), {{"run", runtime::RunDetailsJson(details, now)}});
  return Status::Ok();
}

}  // namespace air::cli
