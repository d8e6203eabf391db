// Noticing runs whose supervisor is gone. A run is live (PENDING, RUNNING, TERMINATING) only while
// its supervisor process exists; `air get`, `air list` and `air cancel` call ReconcileRun so a
// supervisor that was killed (kill -9, a reboot) does not leave a run RUNNING forever: every
// process its nodes left is killed (KillLeftoverProcesses), the run
// becomes INTERNAL_ERROR, naming the supervisor's pid and log, and its open attempt and nodes are
// closed (with the agents' exit reports where they wrote one), and its tracking run ends
// (runtime/tracking_link.h: FinishTrackingRun). The pid is checked together with
// its start time, so a reused pid is not mistaken for the supervisor.
// Thread safety: stateless functions over a caller-owned Store.
#pragma once

#include "base/env.h"
#include "runtime/layout.h"
#include "store/store.h"

namespace air::runtime {

// How long a PENDING run may wait for its supervisor to record itself.
inline constexpr int64_t kSupervisorStartGraceMicros = 30'000'000;

bool SupervisorAlive(const store::RunRecord& run);

// Kills every process left of the run's nodes, in every attempt, through their tracker files
// (agent/process_tracker.h), agents included. Returns how many processes were found alive.
// Only for a run whose supervisor is gone (or ended): a live supervisor owns its nodes.
Result<int> KillLeftoverProcesses(store::Store* store, const Layout& layout, int64_t run_id,
                                  Env* env);

// Returns the run, moved to INTERNAL_ERROR first when its supervisor is gone: what the dead
// supervisor left running is killed before the run is marked. A run whose open attempt lives on
// in the backend's scheduler (Slurm: the job is still known) is adopted instead by a new
// supervisor started here (`air supervise --adopt-from`), and returned still live.
// With `cancel_reason` (`air cancel`), a run whose supervisor is gone ends CANCELED instead.
Result<store::RunRecord> ReconcileRun(store::Store* store, const Layout& layout,
                                      store::RunRecord run, Env* env,
                                      const std::string& cancel_reason = "");

}  // namespace air::runtime
