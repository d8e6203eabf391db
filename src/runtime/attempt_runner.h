// AttemptRunner: one attempt from launch to the last node's end (docs/state-machine.md).
//
// It launches every node through the ClusterBackend, records each node's start and end in the
// store, and decides the attempt's outcome:
//   - every node exited 0 on its own                      -> SUCCEEDED
//   - a node exited non-zero, died by a signal, or was lost -> stop all nodes -> FAILED
//     (nodes that were lost themselves, NodeStatus::node_lost, are listed in the outcome so the
//     supervisor can continue on the others: docs/state-machine.md, "Elastic retries")
//   - the deadline (timeout_minutes) passed               -> TERMINATING, stop -> TIMED_OUT
//     (a backend whose scheduler enforces the limit reports it: SchedulerStatus::timed_out)
//   - a cancel was requested                              -> TERMINATING, stop -> CANCELED
//   - no node wrote output or logged a metric for hang_timeout_minutes (runtime/hang_watch.h)
//     -> a `hang` event naming the nodes that went silent first, stop -> FAILED (hung)
// Once air starts stopping an attempt, how the remaining nodes end no longer matters: a worker
// that traps SIGTERM and exits 0 is STOPPED, never a success. Stopping is SIGTERM to each node's
// process group (by its agent), SIGKILL after the grace period, and, if an agent does not finish
// within grace + 5 s, SIGKILL to everything of the attempt from here (ClusterBackend::KillAll).
// Thread safety: one thread (the run's supervisor).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/cluster_backend.h"
#include "base/env.h"
#include "runtime/hang_watch.h"
#include "runtime/layout.h"
#include "runtime/system_metrics_ingest.h"
#include "store/store.h"

namespace air::runtime {

enum class StopCause { kNone, kNodeFailed, kTimeout, kCancel, kHang };

// A node the attempt lost (its agent or host died), by rank and, where known, host.
struct LostNode {
  int node_rank = 0;
  std::string host;
  std::string reason;
  // "node 1" or "node 1 (host slurm-n2)".
  std::string Name() const;
};

struct AttemptOutcome {
  store::AttemptState state = store::AttemptState::kRunning;
  std::string summary;  // why it did not succeed ("" on success)
  // The nodes lost before air began killing the attempt (a FAILED attempt only).
  std::vector<LostNode> lost_nodes;
  // A FAILED attempt that was stopped because it hung (on_hang decides what follows).
  bool hung = false;
};

struct AttemptRunnerOptions {
  int64_t run_id = 0;
  int attempt = 0;
  int64_t deadline_monotonic_us = 0;  // 0: no timeout
  std::string timeout_text;           // "timeout_minutes: 2" for messages
  int grace_seconds = 10;
  int64_t poll_interval_us = 100'000;
  // Returns a non-empty reason when the run should be canceled ("air cancel", "SIGTERM").
  std::function<std::string()> cancel_requested;
  // Adopt the attempt a dead supervisor launched (ClusterBackend::Attach) instead of launching it;
  // the nodes' starts and ends already in the store are not recorded again.
  bool attach = false;
  // Hang detection: timeout_us > 0 turns it on; node_logs are filled in from the layout.
  HangWatchOptions hang;
};

class AttemptRunner {
 public:
  AttemptRunner(store::Store* store, backends::ClusterBackend* backend, const Layout& layout,
                Env* env, AttemptRunnerOptions options)
      : store_(store),
        backend_(backend),
        layout_(layout),
        env_(env),
        options_(std::move(options)) {}

  // Runs the attempt to its end. A Status error means air itself failed (the store, the
  // backend); the nodes are killed before it returns.
  Result<AttemptOutcome> Run(const backends::AttemptToLaunch& attempt);

 private:
  Status BeginStop(StopCause cause, const std::string& why);
  // Records the `hang` event and stops the attempt.
  Status StopHung(const Hang& hang);
  Status RecordChanges(const std::vector<backends::NodeStatus>& statuses);
  // Events for what the scheduler says (queued with a reason, job state); its time limit.
  Status RecordScheduler(const backends::SchedulerStatus& scheduler);

  store::Store* store_;
  backends::ClusterBackend* backend_;
  Layout layout_;
  Env* env_;
  AttemptRunnerOptions options_;

  StopCause stop_cause_ = StopCause::kNone;
  std::string stop_reason_;
  int64_t stop_started_us_ = 0;
  bool killed_ = false;
  std::vector<bool> recorded_start_;
  std::vector<bool> recorded_end_;
  std::string scheduler_note_;
  std::string queued_reason_;
  std::vector<LostNode> lost_nodes_;
  std::unique_ptr<SystemMetricsIngester> system_metrics_;  // while the nodes sample
};

}  // namespace air::runtime
