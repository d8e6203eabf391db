// Detecting dead supervisors.
#include "runtime/reconcile.h"

#include <fmt/format.h>

#include "agent/proc.h"

namespace air::runtime {

bool SupervisorAlive(const store::RunRecord& run) {
  if (!run.supervisor_pid) return false;
  std::optional<uint64_t> ticks;
  if (run.supervisor_start_ticks && *run.supervisor_start_ticks > 0) {
    ticks = static_cast<uint64_t>(*run.supervisor_start_ticks);
  }
  return agent::IsSameProcessAlive(static_cast<pid_t>(*run.supervisor_pid), ticks);
}

Result<store::RunRecord> ReconcileRun(store::Store* store, const Layout& layout,
                                      store::RunRecord run, Env* env) {
  if (store::IsTerminal(run.state) || SupervisorAlive(run)) return run;
  std::string message;
  if (run.supervisor_pid) {
    message = fmt::format(
        "the run's supervisor (pid {}) is gone without ending the run; its log "
        "is {}",
        *run.supervisor_pid, layout.SupervisorLog(run.id));
  } else if (env->NowMicros() - run.created_us > kSupervisorStartGraceMicros) {
    message = fmt::format("no supervisor started for the run within {} s; see {}",
                          kSupervisorStartGraceMicros / 1'000'000, layout.SupervisorLog(run.id));
  } else {
    return run;  // just submitted: the supervisor is starting
  }
  // Re-read inside the transition: the supervisor may have finished in between.
  auto fresh = store->GetRun(run.id);
  if (!fresh.ok()) return fresh.status();
  if (store::IsTerminal(fresh->state) || SupervisorAlive(*fresh)) return fresh;
  Status moved =
      store->TransitionRun(run.id, store::RunState::kInternalError, message, fresh->state, message);
  if (!moved.ok() && moved.code() != ErrorCode::kFailedPrecondition) return moved;
  return store->GetRun(run.id);
}

}  // namespace air::runtime
