// One attempt: launch, watch, stop, decide.
#include "runtime/attempt_runner.h"

#include <fmt/format.h>

#include "base/log.h"
#include "runtime/alerts.h"
#include "runtime/failure.h"
#include "runtime/gpu_lease.h"

namespace air::runtime {
namespace {

bool IsCleanSuccess(const backends::NodeStatus& status) {
  return status.exit && status.exit->error.empty() && status.exit->exit_code == 0 &&
         !status.exit->stopped_by_air;
}

store::NodeExit ToNodeExit(const backends::NodeStatus& status, int64_t now_us) {
  store::NodeExit exit;
  if (status.exit) {
    exit.exit_code = status.exit->exit_code;
    exit.signal = status.exit->signal;
    exit.stopped_by_air = status.exit->stopped_by_air;
    exit.ended_us = status.exit->ended_us;
  }
  if (exit.ended_us == 0) exit.ended_us = now_us;
  return exit;
}

}  // namespace

std::string LostNode::Name() const {
  return host.empty() ? fmt::format("node {}", node_rank)
                      : fmt::format("node {} (host {})", node_rank, host);
}

Status AttemptRunner::BeginStop(StopCause cause, const std::string& why) {
  if (stop_cause_ != StopCause::kNone) return Status::Ok();
  stop_cause_ = cause;
  stop_reason_ = why;
  stop_started_us_ = env_->MonotonicMicros();
  if (cause == StopCause::kTimeout || cause == StopCause::kCancel) {
    Status moved = store_->TransitionRun(options_.run_id, store::RunState::kTerminating, why,
                                         store::RunState::kRunning);
    if (!moved.ok() && moved.code() != ErrorCode::kFailedPrecondition) return moved;
  }
  AIR_RETURN_IF_ERROR(
      store_->AppendEvent(options_.run_id, "stop",
                          fmt::format("stopping every node: {} (SIGTERM, SIGKILL after {} s)", why,
                                      options_.grace_seconds),
                          options_.attempt));
  return backend_->StopAll();
}

Status AttemptRunner::StopHung(const Hang& hang) {
  const std::string description = hang.Describe(options_.hang.timeout_text);
  AIR_RETURN_IF_ERROR(store_->AppendEvent(options_.run_id, "hang", description, options_.attempt));
  AIR_RETURN_IF_ERROR(
      BeginStop(StopCause::kHang, fmt::format("the attempt hung ({}; silent first: {})",
                                              options_.hang.timeout_text, hang.NodeNames())));
  stop_reason_ = "hung: " + description;  // the attempt's failure summary
  return Status::Ok();
}

Status AttemptRunner::RecordChanges(const std::vector<backends::NodeStatus>& statuses) {
  for (const auto& status : statuses) {
    const int rank = status.node_rank;
    if (status.started && !recorded_start_[rank]) {
      recorded_start_[rank] = true;
      AIR_RETURN_IF_ERROR(store_->RecordNodeStarted(
          options_.run_id, options_.attempt, rank, status.started->agent_pid, status.started->pid,
          status.started->pgid, status.started->started_us));
    }
    if (status.phase != backends::NodePhase::kEnded || recorded_end_[rank]) continue;
    recorded_end_[rank] = true;
    const bool air_was_stopping = stop_cause_ != StopCause::kNone;
    store::NodeState state = store::NodeState::kExited;
    std::string ending;
    if (!status.exit) {
      state = store::NodeState::kLost;
      ending = "was lost: " + status.lost_reason;
    } else {
      ending = DescribeNodeEnding(*status.exit);
      if (air_was_stopping || status.exit->stopped_by_air) state = store::NodeState::kStopped;
    }
    AIR_RETURN_IF_ERROR(store_->RecordNodeEnded(
        options_.run_id, options_.attempt, rank, state, ToNodeExit(status, env_->NowMicros()),
        state == store::NodeState::kLost ? status.lost_reason : ""));
    // A node gone by itself, not by air's kill: even one lost while air was stopping the others
    // (its peers may have failed first, from its loss).
    if (!status.exit && status.node_lost && !killed_) {
      lost_nodes_.push_back({rank, status.host, status.lost_reason});
    }
    if (air_was_stopping || IsCleanSuccess(status)) continue;
    if (status.exit && status.exit->stopped_by_air) {
      ending += " after its agent was asked to stop by a signal that did not come from air";
    }
    std::string summary = NodeFailureSummary(
        rank, options_.attempt, ending, layout_.NodeLog(options_.run_id, options_.attempt, rank));
    AIR_RETURN_IF_ERROR(BeginStop(StopCause::kNodeFailed, summary));
  }
  return Status::Ok();
}

Status AttemptRunner::RecordScheduler(const backends::SchedulerStatus& scheduler) {
  if (scheduler.note != scheduler_note_ && !scheduler.note.empty()) {
    scheduler_note_ = scheduler.note;
    AIR_RETURN_IF_ERROR(
        store_->AppendEvent(options_.run_id, "scheduler", scheduler.note, options_.attempt));
  }
  if (scheduler.queued_reason != queued_reason_) {
    queued_reason_ = scheduler.queued_reason;
    // An empty message: no longer queued (runtime/run_view.h shows the latest).
    AIR_RETURN_IF_ERROR(
        store_->AppendEvent(options_.run_id, "queue", queued_reason_, options_.attempt));
  }
  if (scheduler.timed_out && stop_cause_ == StopCause::kNone) {
    return BeginStop(StopCause::kTimeout,
                     "timed out (" + options_.timeout_text + "; the scheduler's time limit)");
  }
  return Status::Ok();
}

Result<AttemptOutcome> AttemptRunner::Run(const backends::AttemptToLaunch& attempt) {
  const size_t n = attempt.nodes.size();
  recorded_start_.assign(n, false);
  recorded_end_.assign(n, false);
  // On a host whose GPUs the runtime hands out, lease them first (disjoint from other runs).
  backends::AttemptToLaunch leased = attempt;
  const auto& host_gpus = backend_->Capabilities().gpu_devices;
  if (options_.attach) {
    AIR_ASSIGN_OR_RETURN(auto known, store_->ListNodes(options_.run_id, options_.attempt));
    for (const store::NodeRecord& node : known) {
      if (node.node_rank < 0 || static_cast<size_t>(node.node_rank) >= n) continue;
      recorded_start_[node.node_rank] = node.state != store::NodeState::kStarting;
      recorded_end_[node.node_rank] =
          node.state != store::NodeState::kStarting && node.state != store::NodeState::kRunning;
    }
  } else if (attempt.gpus_per_node > 0 && !host_gpus.empty()) {
    GpuLeaseRequest request{options_.run_id, options_.attempt, host_gpus,
                            static_cast<size_t>(attempt.gpus_per_node) * n};
    request.poll_interval_us = options_.poll_interval_us;
    request.deadline_monotonic_us = options_.deadline_monotonic_us;
    request.cancel_requested = options_.cancel_requested;
    auto lease = AcquireGpus(store_, request, env_);
    if (!lease.ok()) {
      return AttemptOutcome{store::AttemptState::kFailed,
                            "could not lease GPUs: " + lease.status().message()};
    }
    if (lease->devices.empty()) {
      bool timed_out = lease->gave_up == "timed out";
      return AttemptOutcome{
          timed_out ? store::AttemptState::kTimedOut : store::AttemptState::kCanceled,
          timed_out ? "timed out (" + options_.timeout_text + ") waiting for GPUs"
                    : lease->gave_up};
    }
    leased.devices = lease->devices;
  }
  struct Release {
    store::Store* store;
    int64_t run_id;
    bool leased;
    ~Release() {
      if (leased) (void)store->ReleaseDevices(run_id);
    }
  } release{store_, options_.run_id, !leased.devices.empty()};
  Status launched = options_.attach ? backend_->Attach(leased) : backend_->Launch(leased);
  if (!launched.ok()) {
    return AttemptOutcome{store::AttemptState::kFailed,
                          (options_.attach ? "a restarted supervisor could not re-attach: "
                                           : "could not start the nodes: ") +
                              launched.message()};
  }
  AIR_INFO("run {}: attempt {}: {} node(s) launched", options_.run_id, options_.attempt, n);
  // The nodes' alerts become events as they come; the outcome's summary leads with the first.
  AlertIngester alerts(store_, layout_, env_, options_.run_id, options_.attempt,
                       static_cast<int>(n));
  if (n > 0 && leased.nodes[0].launch.system_metrics_interval_s > 0) {
    system_metrics_ = std::make_unique<SystemMetricsIngester>(
        store_, layout_, options_.run_id, options_.attempt, static_cast<int>(n), env_);
  }
  std::optional<HangWatch> hang_watch;
  if (options_.hang.timeout_us > 0) {
    HangWatchOptions hang = options_.hang;
    hang.node_logs.clear();
    for (size_t rank = 0; rank < n; ++rank) {
      hang.node_logs.push_back(
          layout_.NodeLog(options_.run_id, options_.attempt, static_cast<int>(rank)));
    }
    hang_watch.emplace(env_, std::move(hang));
  }
  Status failure = options_.attach ? alerts.Resume() : Status::Ok();
  while (failure.ok()) {
    auto polled = backend_->Poll(options_.poll_interval_us);
    if (!polled.ok()) {
      failure = polled.status();
      break;
    }
    // The scheduler's word first: a node it stopped at the time limit is then STOPPED, not a
    // failure of its own.
    failure = RecordScheduler(backend_->Scheduler());
    if (!failure.ok()) break;
    failure = RecordChanges(*polled);
    if (!failure.ok()) break;
    failure = alerts.Poll();  // after the nodes' starts and ends: the timeline reads in order
    if (!failure.ok()) break;
    if (system_metrics_) system_metrics_->Poll(/*final=*/false);
    bool all_ended = true;
    for (const auto& status : *polled) {
      all_ended = all_ended && status.phase == backends::NodePhase::kEnded;
    }
    if (all_ended) break;
    const int64_t now = env_->MonotonicMicros();
    if (stop_cause_ == StopCause::kNone) {
      if (options_.deadline_monotonic_us != 0 && now >= options_.deadline_monotonic_us &&
          !backend_->Capabilities().enforces_time_limit) {
        failure = BeginStop(StopCause::kTimeout, "timed out (" + options_.timeout_text + ")");
      } else if (options_.cancel_requested) {
        std::string reason = options_.cancel_requested();
        if (!reason.empty()) failure = BeginStop(StopCause::kCancel, reason);
      }
      if (failure.ok() && stop_cause_ == StopCause::kNone && hang_watch) {
        std::vector<NodeLife> lives(n, NodeLife::kNotStarted);
        for (const auto& status : *polled) {
          if (status.node_rank < 0 || static_cast<size_t>(status.node_rank) >= n) continue;
          lives[status.node_rank] =
              status.phase == backends::NodePhase::kStarting  ? NodeLife::kNotStarted
              : status.phase == backends::NodePhase::kRunning ? NodeLife::kRunning
                                                              : NodeLife::kEnded;
        }
        if (auto hang = hang_watch->Check(lives)) failure = StopHung(*hang);
      }
      if (!failure.ok()) break;
    } else if (!killed_ &&
               now - stop_started_us_ > (int64_t{options_.grace_seconds} + 5) * 1'000'000) {
      killed_ = true;
      (void)store_->AppendEvent(options_.run_id, "stop",
                                "nodes did not stop within the grace period: SIGKILL to every "
                                "process of the attempt",
                                options_.attempt);
      (void)backend_->KillAll();
    }
  }
  if (!failure.ok()) {
    (void)backend_->KillAll();
    return failure;
  }
  if (system_metrics_) system_metrics_->Poll(/*final=*/true);
  switch (stop_cause_) {
    case StopCause::kNone:
      return AttemptOutcome{store::AttemptState::kSucceeded, ""};
    case StopCause::kNodeFailed:
      return AttemptOutcome{store::AttemptState::kFailed,
                            SummaryWithFirstAlert(stop_reason_, alerts.first()), lost_nodes_};
    case StopCause::kHang:
      return AttemptOutcome{store::AttemptState::kFailed, stop_reason_, lost_nodes_,
                            /*hung=*/true};
    case StopCause::kTimeout:
      return AttemptOutcome{store::AttemptState::kTimedOut,
                            SummaryWithFirstAlert(stop_reason_, alerts.first())};
    case StopCause::kCancel:
      return AttemptOutcome{store::AttemptState::kCanceled, stop_reason_};
  }
  return Internal("unreachable stop cause");
}

}  // namespace air::runtime
