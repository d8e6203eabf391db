// `air list [--all-status] [--limit N] [--filter experiment=GLOB|state=STATE]...`: runs, newest
// first; by default only live ones (PENDING, RUNNING, TERMINATING). A state filter takes any
// case and the seed system's names SUCCESS and TIMEDOUT.
#include <cctype>
#include <memory>

#include "base/strings.h"
#include "cli/commands.h"
#include "runtime/layout.h"
#include "runtime/reconcile.h"
#include "runtime/run_lookup.h"
#include "runtime/run_progress.h"
#include "runtime/run_view.h"

namespace air::cli {
namespace {

struct ListFlags {
  bool all_status = false;
  int limit = 25;
  std::vector<std::string> filters;
};

std::vector<std::string> StateNames() {
  std::vector<std::string> names;
  for (store::RunState s : store::AllRunStates()) names.push_back(store::RunStateName(s));
  return names;
}

// A state as a user types it: any case, and the seed system's names SUCCESS and TIMEDOUT.
std::optional<store::RunState> ParseStateFilter(const std::string& text) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "SUCCESS") return store::RunState::kSucceeded;
  if (upper == "TIMEDOUT") return store::RunState::kTimedOut;
  return store::ParseRunState(upper);
}

Status ListRuns(CliContext& ctx, const ListFlags& flags) {
  if (flags.limit < 1) {
    return InvalidArgument("--limit must be at least 1 (got " + std::to_string(flags.limit) + ")");
  }
  store::RunFilter filter;
  filter.include_terminal = flags.all_status;
  std::optional<store::RunState> state;
  for (const std::string& f : flags.filters) {
    size_t eq = f.find('=');
    std::string key = eq == std::string::npos ? f : f.substr(0, eq);
    if (eq == std::string::npos || eq + 1 == f.size()) {
      return InvalidArgument("--filter '" + f + "': expected KEY=VALUE, e.g. experiment=my-exp*");
    }
    std::string value = f.substr(eq + 1);
    if (key == "experiment") {
      filter.experiment_glob = value;
    } else if (key == "state") {
      state = ParseStateFilter(value);
      if (!state) {
        return InvalidArgument("--filter state=" + value + ": unknown state" +
                               DidYouMeanSuffix(value, StateNames()) +
                               "; valid: " + Join(StateNames(), ", "));
      }
      filter.include_terminal = true;
    } else {
      return InvalidArgument("--filter " + key + ": unknown key" +
                             DidYouMeanSuffix(key, {"experiment", "state"}) +
                             "; valid keys: experiment (a glob), state");
    }
  }
  AIR_ASSIGN_OR_RETURN(std::string air_home, AirHome(ctx));
  AIR_ASSIGN_OR_RETURN(runtime::Layout layout, runtime::ResolveLayout(air_home, ctx.env));
  std::vector<store::RunRecord> runs;
  std::vector<std::string> queue_reasons;  // per run: queued in a scheduler (shown PENDING)
  if (ctx.env->FileExists(layout.DbPath())) {
    AIR_ASSIGN_OR_RETURN(auto store, runtime::OpenExistingStore(layout, ctx.env));
    // Live runs only: reconciling may end some of the rows found (their supervisor is gone), so
    // the limit applies to what is left, not to the query.
    if (!state && flags.all_status) filter.limit = flags.limit;
    AIR_ASSIGN_OR_RETURN(std::vector<store::RunRecord> found, store->ListRuns(filter));
    for (auto& run : found) {
      AIR_ASSIGN_OR_RETURN(run,
                           runtime::ReconcileRun(store.get(), layout, std::move(run), ctx.env));
      AIR_ASSIGN_OR_RETURN(std::string queued, runtime::LoadQueueReason(store.get(), run));
      const store::RunState shown = queued.empty() ? run.state : store::RunState::kPending;
      if (state && shown != *state) continue;
      if (!flags.all_status && !state && store::IsTerminal(run.state)) continue;
      runs.push_back(std::move(run));
      queue_reasons.push_back(std::move(queued));
      if (static_cast<int>(runs.size()) >= flags.limit) break;
    }
  }
  int64_t now = ctx.env->NowMicros();
  nlohmann::json items = nlohmann::json::array();
  std::unique_ptr<store::Store> store;  // for each run's progress (-o json)
  if (ctx.json() && !runs.empty()) {
    AIR_ASSIGN_OR_RETURN(store, runtime::OpenExistingStore(layout, ctx.env));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    items.push_back(runtime::RunSummaryJson(runs[i], now, queue_reasons[i]));
    if (!store) continue;
    auto progress = runtime::LoadRunProgress(store.get(), layout, runs[i], ctx.env, now);
    if (progress.ok()) items.back()["progress"] = runtime::ProgressJson(*progress);
  }
  EmitData(ctx, {{"runs", items}}, runtime::RunListText(runs, now, queue_reasons));
  return Status::Ok();
}

}  // namespace

void RegisterListCommand(CLI::App& root, CliContext& ctx) {
  auto flags = std::make_shared<ListFlags>();
  auto* cmd =
      root.add_subcommand("list", "list runs, newest first (live ones unless --all-status)");
  cmd->add_flag("--all-status", flags->all_status, "include finished runs");
  cmd->add_option("--limit", flags->limit, "show at most N runs (default 25)");
  cmd->add_option("--filter", flags->filters,
                  "experiment=GLOB or state=STATE (repeatable), e.g. experiment='sft-*', "
                  "state=FAILED")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->callback([&ctx, flags] {
    Status status = ListRuns(ctx, *flags);
    if (!status.ok()) EmitError(ctx, status);
  });
}

}  // namespace air::cli
