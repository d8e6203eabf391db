// `air cancel RUN_ID... | --all [--no-wait]`: asks each run's supervisor to stop it (every
// node's process group gets SIGTERM, then SIGKILL after the grace period) and, unless
// --no-wait, waits until the run is CANCELED. A PENDING run whose supervisor has not started
// yet is canceled directly. Runs that already ended are reported as they are.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "runtime/layout.h"
#include "runtime/reconcile.h"
#include "runtime/run_lookup.h"
#include "runtime/run_view.h"
#include "runtime/supervisor.h"

namespace air::cli {
namespace {

struct CancelFlags {
  std::vector<std::string> run_ids;
  bool all = false;
  bool no_wait = false;
};

Result<store::RunRecord> CancelOne(CliContext& ctx, store::Store* store,
                                   const runtime::Layout& layout, int64_t run_id, bool wait) {
  AIR_ASSIGN_OR_RETURN(store::RunRecord run, store->GetRun(run_id));
  if (store::IsTerminal(run.state)) return run;
  AIR_ASSIGN_OR_RETURN(run, store->RequestCancel(run_id));
  // A supervisor that died cannot act on the flag: its nodes' processes are killed here and
  // the run ends CANCELED (runtime/reconcile.h).
  AIR_ASSIGN_OR_RETURN(run, runtime::ReconcileRun(store, layout, std::move(run), ctx.env,
                                                  "canceled by `air cancel`"));
  if (store::IsTerminal(run.state)) return run;
  if (run.state == store::RunState::kPending && !runtime::SupervisorAlive(run)) {
    // No supervisor has claimed it yet: end it here. If one claims it at the same moment, the
    // store lets only one of the two transitions happen, and the supervisor sees the flag.
    Status moved = store->TransitionRun(run_id, store::RunState::kCanceled,
                                        "canceled by `air cancel` before it started",
                                        store::RunState::kPending);
    if (!moved.ok() && moved.code() != ErrorCode::kFailedPrecondition) return moved;
  }
  if (!wait) return store->GetRun(run_id);
  // The supervisor checks the flag every 100 ms; stopping takes at most the grace period.
  runtime::SupervisorSettings settings = runtime::ReadSupervisorSettings(ctx.env);
  const int64_t deadline =
      ctx.env->MonotonicMicros() + (int64_t{settings.grace_seconds} + 15) * 1'000'000;
  while (true) {
    AIR_ASSIGN_OR_RETURN(run, runtime::LoadRun(store, layout, run_id, ctx.env));
    if (store::IsTerminal(run.state) || ctx.env->MonotonicMicros() > deadline) return run;
    ctx.env->SleepMicros(50'000);
  }
}

Status CancelRuns(CliContext& ctx, const CancelFlags& flags) {
  if (flags.all == !flags.run_ids.empty()) {
    return InvalidArgument("usage: air cancel RUN_ID... or air cancel --all");
  }
  std::vector<int64_t> ids;
  for (const auto& text : flags.run_ids) {
    AIR_ASSIGN_OR_RETURN(int64_t id, runtime::ParseRunId(text));
    ids.push_back(id);
  }
  AIR_ASSIGN_OR_RETURN(std::string air_home, AirHome(ctx));
  AIR_ASSIGN_OR_RETURN(runtime::Layout layout, runtime::ResolveLayout(air_home, ctx.env));
  if (flags.all && !ctx.env->FileExists(layout.DbPath())) {
    EmitData(ctx, {{"runs", nlohmann::json::array()}}, "no live runs to cancel");
    return Status::Ok();
  }
  AIR_ASSIGN_OR_RETURN(auto store, runtime::OpenExistingStore(layout, ctx.env));
  if (flags.all) {
    store::RunFilter live;
    live.include_terminal = false;
    AIR_ASSIGN_OR_RETURN(auto runs, store->ListRuns(live));
    for (const auto& run : runs) ids.push_back(run.id);
  }
  // Every cancel is requested before waiting on any, so they stop in parallel.
  std::vector<store::RunRecord> results;
  std::vector<bool> ended_before;
  std::vector<int> leftovers;
  for (int64_t id : ids) {
    AIR_ASSIGN_OR_RETURN(store::RunRecord before, store->GetRun(id));
    ended_before.push_back(store::IsTerminal(before.state));
    // A run that ended may still have left processes (a supervisor killed together with its
    // agents, noticed by an older air): stop them too.
    int left = 0;
    if (store::IsTerminal(before.state)) {
      AIR_ASSIGN_OR_RETURN(left, runtime::KillLeftoverProcesses(store.get(), layout, id, ctx.env));
    }
    leftovers.push_back(left);
    AIR_ASSIGN_OR_RETURN(store::RunRecord run,
                         CancelOne(ctx, store.get(), layout, id, /*wait=*/false));
    results.push_back(std::move(run));
  }
  if (!flags.no_wait) {
    for (auto& run : results) {
      if (store::IsTerminal(run.state)) continue;
      AIR_ASSIGN_OR_RETURN(run, CancelOne(ctx, store.get(), layout, run.id, /*wait=*/true));
    }
  }
  nlohmann::json items = nlohmann::json::array();
  std::string text;
  bool all_stopped = true;
  int64_t now = ctx.env->NowMicros();
  for (size_t i = 0; i < results.size(); ++i) {
    const store::RunRecord& run = results[i];
    nlohmann::json item = runtime::RunSummaryJson(run, now);
    item["already_ended"] = static_cast<bool>(ended_before[i]);
    item["leftover_processes_killed"] = leftovers[i];
    items.push_back(item);
    std::string state = store::RunStateName(run.state);
    if (run.state == store::RunState::kCanceled && !ended_before[i]) {
      text += fmt::format("run {} CANCELED\n", run.id);
    } else if (store::IsTerminal(run.state) && leftovers[i] > 0) {
      text += fmt::format("run {} had already ended {}; stopped {} process(es) it had left\n",
                          run.id, state, leftovers[i]);
    } else if (store::IsTerminal(run.state)) {
      text += fmt::format("run {} had already ended {}; nothing to cancel\n", run.id, state);
    } else {
      all_stopped = all_stopped && flags.no_wait;
      text += fmt::format("run {} {}: cancel requested{}\n", run.id, state,
                          flags.no_wait ? "" : "; it has not stopped yet (see `air get`)");
    }
  }
  if (results.empty()) text = "no live runs to cancel\n";
  if (!all_stopped) {
    return DeadlineExceeded(text + "some runs did not stop in time");
  }
  EmitData(ctx, {{"runs", items}}, text);
  return Status::Ok();
}

}  // namespace

void RegisterCancelCommand(CLI::App& root, CliContext& ctx) {
  auto flags = std::make_shared<CancelFlags>();
  auto* cmd = root.add_subcommand("cancel", "stop runs: every node, no process left behind");
  cmd->add_option("RUN_ID", flags->run_ids, "runs to cancel");
  cmd->add_flag("--all", flags->all, "cancel every live run");
  cmd->add_flag("--no-wait", flags->no_wait, "return once the cancel is requested");
  cmd->callback([&ctx, flags] {
    Status status = CancelRuns(ctx, *flags);
    if (!status.ok()) EmitError(ctx, status);
  });
}

}  // namespace air::cli
