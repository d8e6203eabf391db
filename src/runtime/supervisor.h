// The run supervisor (`air supervise RUN_ID`, started detached by `air run`): drives one run
// from PENDING to a terminal state (docs/state-machine.md).
//
//   1. claim the run: record our pid and start time, PENDING -> RUNNING
//   2. prepare (runtime/prepare.h), within its own time limit; a failure ends the run FAILED,
//      passing the limit TIMED_OUT, before any command runs; every later attempt gets fresh
//      node working directories
//   3. attempts 0..max_retries, each with a fresh MASTER_PORT (runtime/attempt_runner.h):
//      SUCCEEDED ends the run; FAILED retries while retries are left (after lost nodes, on the
//      nodes left while compute.min_nodes allows: runtime/elastic.h); TIMED_OUT and CANCELED
//      end the run
//   4. any error of air itself ends the run INTERNAL_ERROR with the message
//
// A cancel arrives as the store's cancel flag (`air cancel`) or as SIGTERM/SIGINT/SIGHUP to the
// supervisor. If the supervisor dies anyway, its agents get SIGTERM (parent-death signal) and
// the CLI marks the run INTERNAL_ERROR when it finds the supervisor gone (runtime/reconcile.h) -
// unless the attempt lives on in the backend's scheduler (a Slurm job): then the CLI starts a
// new supervisor that adopts it (SupervisorOptions::adopt_from_pid, ClusterBackend::Attach) and the
// run ends with the job's real state.
// Thread safety: runs on the supervisor process's main thread; changes its signal mask.
#pragma once

#include <cstdint>
#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air::runtime {

struct SupervisorOptions {
  std::string air_home;
  std::string agent_binary;  // the air executable, for `air agent`
  // > 0: adopt the run whose supervisor (this pid) died while its attempt lived on in the
  // backend's scheduler (runtime/reconcile.h starts `air supervise RUN --adopt-from PID`).
  int64_t adopt_from_pid = 0;
};

// Test hooks, read from the environment the supervisor inherits (docs/state-machine.md):
//   AIR_TEST_MINUTE_SECONDS  seconds per timeout minute (default 60; tests use e.g. 1)
//   AIR_STOP_GRACE_SECONDS   SIGTERM -> SIGKILL grace when stopping nodes (default 10)
//   AIR_PREPARE_TIMEOUT_MINUTES  limit of the preparation (snapshot materialization,
//                            environment build), apart from timeout_minutes (default 60)
struct SupervisorSettings {
  double minute_seconds = 60;
  int grace_seconds = 10;
  double prepare_timeout_minutes = 60;
};
SupervisorSettings ReadSupervisorSettings(Env* env);

// Returns when the run is in a terminal state. The Status is an error only when even that could
// not be recorded.
Status SuperviseRun(int64_t run_id, const SupervisorOptions& options, Env* env);

}  // namespace air::runtime
