// Detecting dead supervisors.
#include "runtime/reconcile.h"

#include <fmt/format.h>

#include "agent/node_launch.h"
#include "agent/proc.h"
#include "agent/process_tracker.h"
#include "backends/cluster_registry.h"
#include "runtime/daemon.h"
#include "runtime/tracking_link.h"

namespace air::runtime {
namespace {

// Ends the attempt and the nodes the dead supervisor left open, so `air get` does not show them
// RUNNING under an ended run. A node whose agent wrote its exit report (the agents stop their
// commands when the supervisor dies) gets that outcome; the others are LOST.
Status CloseOpenAttempts(store::Store* store, const Layout& layout, int64_t run_id,
                         store::AttemptState attempt_state, const std::string& message, Env* env) {
  AIR_ASSIGN_OR_RETURN(std::vector<store::AttemptRecord> attempts, store->ListAttempts(run_id));
  for (const store::AttemptRecord& attempt : attempts) {
    if (attempt.ended_us) continue;
    AIR_ASSIGN_OR_RETURN(std::vector<store::NodeRecord> nodes,
                         store->ListNodes(run_id, attempt.attempt));
    for (const store::NodeRecord& node : nodes) {
      if (node.state != store::NodeState::kStarting && node.state != store::NodeState::kRunning) {
        continue;
      }
      store::NodeExit exit;
      store::NodeState state = store::NodeState::kLost;
      auto report = agent::ReadNodeExitReport(
          env, layout.NodeExitFile(run_id, attempt.attempt, node.node_rank));
      if (report.ok() && report->error.empty()) {
        exit.exit_code = report->exit_code;
        exit.signal = report->signal;
        exit.stopped_by_air = report->stopped_by_air;
        exit.ended_us = report->ended_us;
        state = report->stopped_by_air ? store::NodeState::kStopped : store::NodeState::kExited;
      }
      AIR_RETURN_IF_ERROR(store->RecordNodeEnded(run_id, attempt.attempt, node.node_rank, state,
                                                 exit, "the run's supervisor is gone"));
    }
    AIR_RETURN_IF_ERROR(store->FinishAttempt(run_id, attempt.attempt, attempt_state, message));
  }
  return Status::Ok();
}

// How long reconcile waits for the supervisor it started to claim the run.
constexpr int64_t kAdoptWaitMicros = 15'000'000;

// A run whose open attempt lives on in the backend's scheduler (a Slurm job) is not given up:
// a new supervisor adopts it (`air supervise RUN --adopt-from PID`). True once one has claimed
// the run (it may be another command's), false when nothing lives on.
// `gone` (when the attempt's job no longer exists in the scheduler: Slurm purged it) names it.
Result<bool> StartAdoptingSupervisor(store::Store* store, const Layout& layout,
                                     const store::RunRecord& run, Env* env, std::string* gone) {
  if (!run.supervisor_pid || run.state == store::RunState::kPending) return false;
  AIR_ASSIGN_OR_RETURN(std::vector<store::AttemptRecord> attempts, store->ListAttempts(run.id));
  if (attempts.empty() || attempts.back().ended_us) return false;
  auto config = backends::LoadClusterConfig(layout.home(), run.backend, env);
  if (!config.ok()) return false;
  auto lives = backends::DescribeDetachedAttempt(
      *config, layout.AttemptDir(run.id, attempts.back().attempt), env);
  if (!lives.ok() && lives.status().code() == ErrorCode::kNotFound) {
    *gone = lives.status().message();
    return false;
  }
  if (!lives.ok() || lives->empty()) return false;
  AIR_ASSIGN_OR_RETURN(std::string air_binary, CurrentExecutable());
  AIR_RETURN_IF_ERROR(
      StartDetachedAir(air_binary,
                       {"supervise", std::to_string(run.id), "--air-home", layout.home(),
                        "--adopt-from", std::to_string(*run.supervisor_pid)},
                       layout.SupervisorLog(run.id),
                       fmt::format("a supervisor to adopt run {} ({} lives on)", run.id, *lives)));
  const int64_t deadline = env->MonotonicMicros() + kAdoptWaitMicros;
  while (env->MonotonicMicros() < deadline) {
    AIR_ASSIGN_OR_RETURN(store::RunRecord now, store->GetRun(run.id));
    if (store::IsTerminal(now.state)) return true;
    if (now.supervisor_pid != run.supervisor_pid && SupervisorAlive(now)) return true;
    env->SleepMicros(50'000);
  }
  return false;
}

}  // namespace

Result<int> KillLeftoverProcesses(store::Store* store, const Layout& layout, int64_t run_id,
                                  Env* env) {
  AIR_ASSIGN_OR_RETURN(std::vector<store::AttemptRecord> attempts, store->ListAttempts(run_id));
  int found = 0;
  Status first = Status::Ok();
  for (const store::AttemptRecord& attempt : attempts) {
    AIR_ASSIGN_OR_RETURN(std::vector<store::NodeRecord> nodes,
                         store->ListNodes(run_id, attempt.attempt));
    for (const store::NodeRecord& node : nodes) {
      auto info = agent::ReadTrackerInfo(
          env, layout.NodeTrackerFile(run_id, attempt.attempt, node.node_rank));
      if (!info.ok()) continue;  // the agent never started the command
      auto killed = agent::KillTrackedNode(*info, env);
      if (killed.ok()) {
        found += *killed;
      } else if (first.ok()) {
        first = killed.status().WithContext(
            fmt::format("attempt {} node {}", attempt.attempt, node.node_rank));
      }
    }
  }
  if (!first.ok()) return first;
  return found;
}

bool SupervisorAlive(const store::RunRecord& run) {
  if (!run.supervisor_pid) return false;
  std::optional<uint64_t> ticks;
  if (run.supervisor_start_ticks && *run.supervisor_start_ticks > 0) {
    ticks = static_cast<uint64_t>(*run.supervisor_start_ticks);
  }
  return agent::IsSameProcessAlive(static_cast<pid_t>(*run.supervisor_pid), ticks);
}

Result<store::RunRecord> ReconcileRun(store::Store* store, const Layout& layout,
                                      store::RunRecord run, Env* env,
                                      const std::string& cancel_reason) {
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
  std::string gone;
  if (auto adopted = StartAdoptingSupervisor(store, layout, *fresh, env, &gone);
      adopted.ok() && *adopted) {
    return store->GetRun(run.id);
  }
  if (!gone.empty()) message += "; " + gone;
  // What the dead supervisor left running goes first, so the run is never marked ended while
  // its processes still work (and hold GPUs, ports, files).
  auto killed = KillLeftoverProcesses(store, layout, run.id, env);
  if (!killed.ok()) {
    message += "; killing what it left failed: " + killed.status().message();
  } else if (*killed > 0) {
    message += fmt::format("; {} process(es) it left were killed", *killed);
  }
  store::RunState to = store::RunState::kInternalError;
  if (!cancel_reason.empty()) {
    to = store::RunState::kCanceled;
    message = cancel_reason + "; " + message;
  }
  Status moved = store->TransitionRun(run.id, to, message, fresh->state,
                                      to == store::RunState::kCanceled ? "" : message);
  if (moved.code() == ErrorCode::kFailedPrecondition) return store->GetRun(run.id);
  AIR_RETURN_IF_ERROR(moved);
  AIR_RETURN_IF_ERROR(CloseOpenAttempts(store, layout, run.id,
                                        to == store::RunState::kCanceled
                                            ? store::AttemptState::kCanceled
                                            : store::AttemptState::kInternalError,
                                        message, env));
  AIR_ASSIGN_OR_RETURN(store::RunRecord ended, store->GetRun(run.id));
  // The tracking run ends with the air run (FAILED for INTERNAL_ERROR, KILLED for CANCELED), in
  // air's store or on the external server; a server that cannot be told is an event, not an
  // error of this command.
  if (Status tracked = FinishTrackingRun(store, ended, layout.home(), env); !tracked.ok()) {
    (void)store->AppendEvent(run.id, "tracking",
                             "could not set the tracking run's status: " + tracked.message());
  }
  return ended;
}

}  // namespace air::runtime
