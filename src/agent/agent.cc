// The node agent: spawn the command in its own process group, capture its output, forward
// stop requests with a grace period, leave no process behind, report the outcome.
#include "agent/agent.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/alert_scanner.h"
#include "agent/log_format.h"
#include "agent/oom_watch.h"
#include "agent/output_filter.h"
#include "agent/proc.h"
#include "agent/process_tracker.h"
#include "agent/system_sampler.h"
#include "agent/volume_mounts.h"
#include "base/posix_io.h"
#include "base/process_limits.h"
#include "base/subprocess.h"

namespace air::agent {
namespace {

// After the command's shell exits, how long to keep reading output still in the pipes.
constexpr int64_t kDrainMicros = 2'000'000;

class FdCloser {
 public:
  explicit FdCloser(int fd = -1) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// Reaps every exited child without blocking; reports the leader's status when it is among them.
void ReapChildren(pid_t leader, bool* leader_exited, int* leader_status) {
  while (true) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    if (pid == leader) {
      *leader_exited = true;
      *leader_status = status;
    }
  }
}

// Starts the command (bash -c COMMAND) in its own process group, inside the node's cgroup
// (when there is one), with the node's environment, stdin from /dev/null, stdout and stderr as
// pipes back to the agent, nothing else the agent inherited, the user's umask, and SIGKILL if
// the agent dies.
Result<RunningSubprocess> SpawnCommand(const NodeLaunch& launch, const sigset_t& original_mask,
                                       const NodeTracker& tracker, Env* env) {
  SubprocessOptions command;
  command.argv = {"bash", "-c", launch.command};
  command.program = launch.shell;
  // The command's environment: the agent's own, with the node's variables set on top.
  command.env_overrides = launch.env;
  command.env_overrides.emplace_back(kNodeTokenVar, tracker.info().token);
  command.workdir = launch.workdir;
  command.cgroup_procs_fd = tracker.command_join_fd();
  command.signal_mask = original_mask;
  command.close_inherited_fds = true;
  command.umask = UserUmask(env);  // air's own processes use 077
  command.no_core_dumps = !launch.secret_names.empty();
  return StartSubprocess(command);
}

// Kills every process of the node if RunNode leaves early on an error of its own (a log that
// can no longer be written): the node must not outlive its agent.
class KillOnEarlyReturn {
 public:
  explicit KillOnEarlyReturn(NodeTracker* tracker) : tracker_(tracker) {}
  ~KillOnEarlyReturn() {
    if (!armed_) return;
    (void)tracker_->KillCommand();
    int status = 0;
    while (::waitpid(-1, &status, WNOHANG) > 0) {
    }
  }
  void Disarm() { armed_ = false; }

 private:
  NodeTracker* tracker_;
  bool armed_ = true;
};

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  return "ended";
}

}  // namespace

Result<NodeExitReport> RunNode(const NodeLaunch& launch, Env* env) {
  // First, while still dumpable: a user namespace's id map is written through /proc/self.
  Status volumes =
      launch.volumes_root.empty() ? Status::Ok() : EnterVolumeNamespace(launch.volumes_root);
  if (!volumes.ok() && launch.volumes_required) return volumes;
  // Secret values are in our environment: no core dump may write them to disk.
  if (!launch.secret_names.empty()) DisableCoreDumps();
  AIR_ASSIGN_OR_RETURN(int opened_log,
                       OpenOwnFileForWrite(launch.log_path, O_CREAT | O_APPEND, 0644, "node log"));
  FdCloser log_fd(opened_log);
  LogLineWriter writer(log_fd.get(), env, {launch.log_path, launch.log_max_bytes, launch.log_keep});
  if (!volumes.ok()) (void)writer.Note("running without /Volumes: " + volumes.message());

  std::vector<std::string> secret_values;
  for (const auto& name : launch.secret_names) {
    if (auto value = env->GetEnv(name); value && !value->empty()) secret_values.push_back(*value);
  }
  LogLineWriter::Stream out{"out", MakeOutputFilter(secret_values), ""};
  LogLineWriter::Stream err{"err", MakeOutputFilter(secret_values), ""};
  // Known fatal lines, matched after redaction, into the node's alerts file.
  AlertScanner alerts(AlertsPath(launch), env);
  writer.set_line_observer([&alerts](std::string_view stream, std::string_view text,
                                     int64_t time_us) { alerts.OnLine(stream, text, time_us); });

  // Orphaned descendants (e.g. a daemonized grandchild) are re-parented to us, not to init.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&stop_signals, sig);
  sigset_t original_mask;
  if (::sigprocmask(SIG_BLOCK, &stop_signals, &original_mask) != 0) {
    return ErrnoStatus("sigprocmask", errno);
  }
  FdCloser signal_fd(::signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK));
  if (signal_fd.get() < 0) return ErrnoStatus("signalfd", errno);

  // Every process the command starts is tracked from before it runs (agent/process_tracker.h);
  // the tracker file lets whoever outlives us kill what is left.
  AIR_ASSIGN_OR_RETURN(
      std::unique_ptr<NodeTracker> tracker,
      NodeTracker::Create(
          fmt::format("air-r{}-a{}-n{}", launch.run_id, launch.attempt, launch.node_rank), env));
  AIR_RETURN_IF_ERROR(
      env->WriteFileAtomic(TrackerPath(launch), TrackerInfoToJson(tracker->info()), 0600));
  // The kernel's OOM kills in the node's memory cgroup, counted from here on, become alerts.
  std::unique_ptr<OomWatch> oom = OomWatch::ForNode(launch, tracker->info(), env);
  int64_t next_oom_check = env->MonotonicMicros() + kOomCheckMicros;
  NodeExitReport report;
  report.started_us = env->NowMicros();
  auto spawned = SpawnCommand(launch, original_mask, *tracker, env);
  if (!spawned.ok()) {
    // The command never ran (its working directory, its shell, the cgroup): the node fails
    // with the reason in its log and its report.
    report.error = spawned.status().message();
    report.ended_us = env->NowMicros();
    (void)writer.Note("could not start the command: " + report.error);
    tracker->Release();
    AIR_RETURN_IF_ERROR(env->WriteFileAtomic(launch.exit_path, NodeExitReportToJson(report), 0600));
    return report;
  }
  const pid_t leader = spawned->pid();
  FdCloser out_fd(spawned->stdout_fd());
  FdCloser err_fd(spawned->stderr_fd());
  report.pid = leader;
  report.pgid = leader;
  KillOnEarlyReturn guard(tracker.get());
  // Signals the command's process group (while its leader is unreaped, so the group id cannot
  // have been reused) and every other process of the node.
  auto signal_all = [&](int sig, bool leader_reaped) {
    if (!leader_reaped) ::killpg(leader, sig);
    tracker->SignalCommand(sig);
  };

  // Under Slurm the node's name is Slurm's (SLURMD_NODENAME), which may not be the hostname.
  std::string host = env->GetEnv("SLURMD_NODENAME").value_or("");
  if (host.empty()) {
    char name[256] = "";
    if (::gethostname(name, sizeof(name) - 1) == 0) host = name;
  }
  NodeStarted started{::getpid(), leader, leader, report.started_us, host};
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(launch.started_path, NodeStartedToJson(started), 0600));
  // The node's system metrics, on a thread of its own, until the command ends.
  std::unique_ptr<SystemSampler> sampler = SystemSampler::ForNode(launch, tracker->info(), env);

  bool leader_exited = false;
  int leader_status = 0;
  bool stopping = false;
  bool killed = false;
  int64_t kill_deadline = 0;
  int64_t drain_deadline = 0;
  const int64_t grace_micros = int64_t{launch.grace_seconds} * 1'000'000;
  char buf[65536];

  auto begin_stop = [&](int sig) {
    if (leader_exited) return;
    if (!stopping) {
      stopping = true;
      kill_deadline = env->MonotonicMicros() + grace_micros;
      (void)writer.Note(
          fmt::format("stop requested (SIG{}): SIGTERM to process group {}, "
                      "SIGKILL after {} s",
                      sigabbrev_np(sig), leader, launch.grace_seconds));
      signal_all(SIGTERM, false);
    } else if (!killed) {
      killed = true;
      (void)writer.Note("second stop request: SIGKILL to the process group");
      signal_all(SIGKILL, false);
    }
  };

  while (out_fd.get() >= 0 || err_fd.get() >= 0 || !leader_exited) {
    const int64_t now = env->MonotonicMicros();
    if (stopping && !killed && !leader_exited && now >= kill_deadline) {
      killed = true;
      (void)writer.Note(fmt::format("grace period of {} s over: SIGKILL to process group {}",
                                    launch.grace_seconds, leader));
      signal_all(SIGKILL, false);
    }
    if (leader_exited && now >= drain_deadline) break;  // escaped processes hold the pipes
    int64_t wait_micros = -1;
    if (stopping && !killed && !leader_exited) wait_micros = kill_deadline - now;
    if (leader_exited) wait_micros = drain_deadline - now;
    if (oom) {
      if (now >= next_oom_check) {
        oom->Check(&alerts);
        next_oom_check = now + kOomCheckMicros;
      }
      const int64_t until_check = next_oom_check - now;
      wait_micros = wait_micros < 0 ? until_check : std::min(wait_micros, until_check);
    }
    pollfd fds[3] = {
        {out_fd.get(), POLLIN, 0}, {err_fd.get(), POLLIN, 0}, {signal_fd.get(), POLLIN, 0}};
    int timeout_ms = wait_micros < 0 ? -1 : static_cast<int>((wait_micros + 999) / 1000);
    int ready = ::poll(fds, 3, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("poll", errno);
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      FdCloser& fd = i == 0 ? out_fd : err_fd;
      LogLineWriter::Stream& stream = i == 0 ? out : err;
      ssize_t n = ::read(fd.get(), buf, sizeof(buf));
      if (n > 0) {
        AIR_RETURN_IF_ERROR(writer.Write(stream, std::string_view(buf, static_cast<size_t>(n))));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        fd.reset();
      }
    }
    if (fds[2].revents & POLLIN) {
      signalfd_siginfo info;
      while (::read(signal_fd.get(), &info, sizeof(info)) == sizeof(info)) {
        if (info.ssi_signo == SIGCHLD) {
          bool was_exited = leader_exited;
          ReapChildren(leader, &leader_exited, &leader_status);
          if (leader_exited && !was_exited) {
            report.ended_us = env->NowMicros();
            drain_deadline = env->MonotonicMicros() + kDrainMicros;
            (void)tracker->KillCommand();  // whatever the shell left behind
          }
        } else {
          begin_stop(static_cast<int>(info.ssi_signo));
        }
      }
    }
  }
  sampler.reset();
  AIR_RETURN_IF_ERROR(writer.Finish(out));
  AIR_RETURN_IF_ERROR(writer.Finish(err));
  if (!alerts.status().ok()) (void)writer.Note(alerts.status().message());
  if (alerts.dropped() > 0) {
    (void)writer.Note(fmt::format(
        "{} more alert line(s) not recorded as alerts (the first {} of a class, {} in all, are)",
        alerts.dropped(), kMaxAlertsPerClass, kMaxAlertsPerNode));
  }

  // Nothing of the node may outlive the agent: kill and reap until no process of it is left.
  if (!leader_exited) signal_all(SIGKILL, false);
  Status killed_all = tracker->KillCommand();
  for (int round = 0; round < 100 && !leader_exited; ++round) {
    ReapChildren(leader, &leader_exited, &leader_status);
    if (!leader_exited) env->SleepMicros(10'000);
  }
  ReapChildren(leader, &leader_exited, &leader_status);
  if (!killed_all.ok()) (void)writer.Note(killed_all.message());
  if (oom) oom->Check(&alerts);  // a kill that ended the command (before its cgroup goes)
  tracker->Release();
  if (!leader_exited) {
    // Cannot happen unless the shell was un-killable; do not report a success.
    report.error = "the command's shell did not exit";
    leader_status = 0;
  }

  guard.Disarm();
  if (report.ended_us == 0) report.ended_us = env->NowMicros();
  report.stopped_by_air = stopping;
  if (WIFEXITED(leader_status) && report.error.empty()) {
    report.exit_code = WEXITSTATUS(leader_status);
  } else if (WIFSIGNALED(leader_status)) {
    report.signal = WTERMSIG(leader_status);
  }
  std::string ending = report.error.empty() ? DescribeWaitStatus(leader_status) : report.error;
  (void)writer.Note(
      fmt::format("command {}{}", ending, stopping ? " (after air asked it to stop)" : ""));
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(launch.exit_path, NodeExitReportToJson(report), 0600));
  return report;
}

int AgentMain(const std::string& launch_path, Env* env) {
  auto text = env->ReadFile(launch_path);
  if (!text.ok()) {
    std::fprintf(stderr, "air agent: %s\n", text.status().message().c_str());
    return 2;
  }
  auto launch = NodeLaunchFromJson(*text, launch_path);
  if (!launch.ok()) {
    std::fprintf(stderr, "air agent: %s\n", launch.status().message().c_str());
    return 2;
  }
  return RunNodeMain(*launch, env);
}

int RunNodeMain(const NodeLaunch& launch, Env* env) {
  auto report = RunNode(launch, env);
  if (!report.ok()) {
    std::fprintf(stderr, "air agent: node %d: %s\n", launch.node_rank,
                 report.status().message().c_str());
    NodeExitReport failed;
    failed.error = report.status().message();
    failed.ended_us = env->NowMicros();
    (void)env->WriteFileAtomic(launch.exit_path, NodeExitReportToJson(failed), 0600);
    return 1;
  }
  return report->exit_code == 0 && !report->stopped_by_air ? 0 : 1;
}

}  // namespace air::agent
