// WorkerGroup: start, poll and stop one node's workers.
#include "launch/worker_group.h"

#include <fmt/format.h>
#include <signal.h>

namespace air::launch {

Result<WorkerGroup> WorkerGroup::Start(const LaunchOptions& options, int restart_count,
                                       const std::string& attempt_dir, Env* env) {
  WorkerGroup group;
  group.attempt_dir_ = attempt_dir;
  group.logs_ = !options.log_dir.empty();
  for (int local = 0; local < options.nproc_per_node; ++local) {
    AIR_RETURN_IF_ERROR(env->CreateDirs(fmt::format("{}/{}", attempt_dir, local)));
  }
  for (int local = 0; local < options.nproc_per_node; ++local) {
    SubprocessOptions spawn;
    spawn.argv = WorkerArgv(options);
    spawn.env_overrides =
        WorkerEnvironment(options, local, restart_count, group.ErrorFile(local), env);
    spawn.output_path = group.LogFile(local);
    spawn.inherit_output = !group.logs_;
    Result<RunningSubprocess> started = StartSubprocess(spawn);
    if (!started.ok()) {
      group.Stop(0, env);
      return started.status().WithContext(fmt::format("start local rank {}", local));
    }
    group.workers_.push_back(
        Worker{local, options.node_rank * options.nproc_per_node + local, *started});
  }
  return group;
}

std::string WorkerGroup::ErrorFile(int local_rank) const {
  return fmt::format("{}/{}/error.json", attempt_dir_, local_rank);
}

std::string WorkerGroup::LogFile(int local_rank) const {
  return logs_ ? fmt::format("{}/{}/output.log", attempt_dir_, local_rank) : std::string();
}

Result<std::vector<WorkerExit>> WorkerGroup::Poll() {
  std::vector<WorkerExit> exits;
  for (Worker& w : workers_) {
    if (!w.process) continue;
    AIR_ASSIGN_OR_RETURN(std::optional<SubprocessResult> ended, w.process->Poll());
    if (!ended) continue;
    // What the worker left running in its process group goes with it.
    w.process->SignalGroup(SIGKILL);
    exits.push_back(WorkerExit{w.local_rank, w.rank, w.process->pid(), *ended});
    w.process.reset();
  }
  return exits;
}

bool WorkerGroup::AllEnded() const {
  for (const Worker& w : workers_) {
    if (w.process) return false;
  }
  return true;
}

std::vector<WorkerExit> WorkerGroup::Stop(double grace_s, Env* env) {
  std::vector<WorkerExit> exits;
  for (Worker& w : workers_) {
    if (w.process) w.process->SignalGroup(SIGTERM);
  }
  const int64_t kill_at = env->MonotonicMicros() + static_cast<int64_t>(grace_s * 1e6);
  bool killed = false;
  while (!AllEnded()) {
    Result<std::vector<WorkerExit>> ended = Poll();
    if (ended.ok()) exits.insert(exits.end(), ended->begin(), ended->end());
    if (!ended.ok()) break;  // waitpid failed: nothing left that we could reap
    if (!killed && env->MonotonicMicros() >= kill_at) {
      for (Worker& w : workers_) {
        if (w.process) w.process->SignalGroup(SIGKILL);
      }
      killed = true;
    }
    if (!AllEnded()) env->SleepMicros(10'000);
  }
  return exits;
}

}  // namespace air::launch
