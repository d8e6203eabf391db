// Following a run's node log across attempts.
#include "runtime/watch.h"

#include <iostream>

#include "agent/log_format.h"
#include "runtime/log_reader.h"
#include "runtime/reconcile.h"

namespace air::runtime {

std::string RenderLogLine(const std::string& raw, bool timestamps) {
  auto record = agent::ParseLogLine(raw);
  if (!record) return raw;
  if (timestamps) return record->timestamp + " " + record->stream + " " + record->text;
  if (record->stream == "air") return "[air] " + record->text;
  return record->text;
}

Result<store::RunRecord> WatchRun(const Layout& layout, int64_t run_id, const WatchOptions& options,
                                  Env* env) {
  AIR_ASSIGN_OR_RETURN(auto store, store::Store::Open(layout.DbPath(), env));
  auto on_line = options.on_line;
  if (!on_line) {
    on_line = [](int, const std::string& line) {
      std::cout << RenderLogLine(line, false) << "\n" << std::flush;
    };
  }
  std::optional<LogFollower> follower;
  int following = -2;  // -1: setup log; >= 0: an attempt
  auto drain = [&](bool final) -> Status {
    if (!follower) return Status::Ok();
    do {  // a block at a time: memory stays bounded however much the log grew
      AIR_ASSIGN_OR_RETURN(std::vector<std::string> lines, follower->ReadNew(final));
      for (const auto& line : lines) on_line(following, line);
    } while (follower->more());
    return Status::Ok();
  };
  while (true) {
    AIR_ASSIGN_OR_RETURN(store::RunRecord run, store->GetRun(run_id));
    AIR_ASSIGN_OR_RETURN(run, ReconcileRun(store.get(), layout, std::move(run), env));
    int target = options.attempt ? *options.attempt : run.attempt_count - 1;
    if (target < 0 && !options.attempt) target = -1;  // nothing launched yet: the setup log
    if (target != following && (target >= 0 || !follower)) {
      if (target >= 0 && target < run.attempt_count) {
        AIR_RETURN_IF_ERROR(drain(true));
        following = target;
        bool first = !follower;
        follower.emplace(layout.NodeLog(run_id, target, options.node));
        if (first && options.start_lines > 0) {
          AIR_RETURN_IF_ERROR(follower->StartAtLastLines(options.start_lines));
        }
        if (options.on_attempt) options.on_attempt(target);
      } else if (target == -1) {
        following = -1;
        follower.emplace(layout.SetupLog(run_id));
      }
    }
    bool done = store::IsTerminal(run.state);
    if (!done && options.attempt && following == *options.attempt) {
      AIR_ASSIGN_OR_RETURN(auto attempts, store->ListAttempts(run_id));
      done = static_cast<int>(attempts.size()) > *options.attempt &&
             attempts[*options.attempt].ended_us.has_value();
    }
    AIR_RETURN_IF_ERROR(drain(done));
    if (done) return run;
    env->SleepMicros(options.poll_interval_us);
  }
}

}  // namespace air::runtime
