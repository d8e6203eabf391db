// The workers air launch runs on this node in one attempt: started through the project's
// spawner (base/subprocess.h), each in its own process group with torchrun's environment,
// polled for their exits, and stopped together (SIGTERM, a grace period, SIGKILL) so that no
// process of theirs is left.
// Thread safety: owned and used by the launcher's thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "base/subprocess.h"
#include "launch/launch_options.h"

namespace air::launch {

struct WorkerExit {
  int local_rank = 0;
  int rank = 0;
  int pid = 0;
  SubprocessResult result;
};

class WorkerGroup {
 public:
  // Starts nproc_per_node workers for attempt `restart_count`; their error files (and, with
  // --log-dir, their output) go under `attempt_dir`/<local_rank>/.
  static Result<WorkerGroup> Start(const LaunchOptions& options, int restart_count,
                                   const std::string& attempt_dir, Env* env);

  // The workers that ended since the last call, in the order they were found.
  Result<std::vector<WorkerExit>> Poll();
  bool AllEnded() const;
  // SIGTERM to every worker's process group, SIGKILL to what is left after `grace_s`; returns
  // once every worker is reaped. Exits found while stopping are returned.
  std::vector<WorkerExit> Stop(double grace_s, Env* env);

  std::string ErrorFile(int local_rank) const;
  std::string LogFile(int local_rank) const;  // "" without --log-dir

 private:
  struct Worker {
    int local_rank = 0;
    int rank = 0;
    std::optional<RunningSubprocess> process;  // nullopt once reaped
  };
  std::vector<Worker> workers_;
  std::string attempt_dir_;
  bool logs_ = false;
};

}  // namespace air::launch
