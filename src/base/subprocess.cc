// fork/exec for every program air starts (see subprocess.h): the child's setup, the start
// report, waiting with output captured or written to a file.
#include "base/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/env.h"
#include "base/fd_hygiene.h"
#include "base/posix_io.h"
#include "base/process_limits.h"

namespace air {

std::string SubprocessResult::Describe() const {
  if (signal) return fmt::format("signal {} ({})", *signal, sigabbrev_np(*signal));
  if (exit_code) return fmt::format("exit code {}", *exit_code);
  return "no exit status";
}

namespace {

// How long output is still read after the program exited: a process it left outside its group
// (setsid) may hold the pipe open forever.
constexpr int kDrainAfterExitMs = 1000;

// The step of the child's setup that failed, reported to the parent with its errno.
enum class Step : int { kExec, kStdin, kWorkdir, kCgroup, kFork, kParentDied, kAffinity };
struct ChildFailure {
  Step step;
  int err;
};

// Only async-signal-safe calls: the child of a possibly multi-threaded parent.
[[noreturn]] void Report(int fd, Step step, int err) {
  ChildFailure failure{step, err};
  (void)!::write(fd, &failure, sizeof(failure));
  ::_exit(127);
}

Status DescribeFailure(const SubprocessOptions& options, const std::string& program,
                       ChildFailure failure) {
  switch (failure.step) {
    case Step::kExec:
      return ErrnoStatus(fmt::format("run {}", program), failure.err);
    case Step::kStdin:
      return ErrnoStatus(
          fmt::format("open {} as the input of {}", options.stdin_path, options.argv[0]),
          failure.err);
    case Step::kWorkdir:
      return ErrnoStatus(
          fmt::format("enter the working directory {} of {}", options.workdir, options.argv[0]),
          failure.err);
    case Step::kCgroup:
      return ErrnoStatus(fmt::format("move {} into its cgroup", options.argv[0]), failure.err);
    case Step::kFork:
      return ErrnoStatus(fmt::format("fork {} into its own session", options.argv[0]), failure.err);
    case Step::kParentDied:
      return Internal(fmt::format("{}: its parent died while starting it", options.argv[0]));
    case Step::kAffinity:
      return ErrnoStatus(
          fmt::format("bind {} to CPUs {}", options.argv[0], fmt::join(options.cpus, ",")),
          failure.err);
  }
  return Internal("unknown start failure of " + options.argv[0]);
}

// Forks and execs the program with stdout on `out_fd` and stderr on `err_fd` (-1: the
// caller's); returns its pid once exec succeeded (detached: 0 once the daemon exec'd). Closes
// nothing of the caller's.
Result<pid_t> ForkExec(const SubprocessOptions& options, int out_fd, int err_fd, bool detach) {
  if (options.argv.empty()) return InvalidArgument("subprocess: empty argv");
  std::vector<std::string> entries = MergedEnvironment(options.env_overrides);
  std::vector<char*> envp = EnvironmentPointers(entries);
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string program = options.program.empty() ? options.argv[0] : options.program;
  const std::string input = options.stdin_path.empty() ? "/dev/null" : options.stdin_path;
  const std::string workdir = options.workdir.empty() && detach ? "/" : options.workdir;
  const FdHygiene hygiene = FdHygieneFor(DefaultEnv());
  const bool close_fds = options.close_inherited_fds || detach;
  cpu_set_t cpus;  // built here: the child of a multi-threaded parent must not allocate
  CPU_ZERO(&cpus);
  for (int cpu : options.cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return InvalidArgument(fmt::format("subprocess {}: CPU {} is not in [0, {})", options.argv[0],
                                         cpu, CPU_SETSIZE));
    }
    CPU_SET(cpu, &cpus);
  }
  sigset_t mask;
  if (options.signal_mask) {
    mask = *options.signal_mask;
  } else {
    sigemptyset(&mask);
  }
  // The child reports a failed step (errno) through this pipe; a successful exec closes it
  // (O_CLOEXEC), so EOF means the program runs.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(report[0]);
    ::close(report[1]);
    return ErrnoStatus("fork " + program, err);
  }
  if (pid == 0) {
    ::close(report[0]);
    if (detach) {
      ::setsid();
      pid_t daemon = ::fork();
      if (daemon < 0) Report(report[1], Step::kFork, errno);
      if (daemon > 0) ::_exit(0);  // the daemon is re-parented away from the caller
    } else if (options.placement == ProcessPlacement::kOwnGroup) {
      ::setpgid(0, 0);
    } else if (options.placement == ProcessPlacement::kNewSession) {
      ::setsid();
    }
    if (!detach && options.parent_death_signal != 0) {
      ::prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
      // The parent may have died before prctl took effect.
      if (::getppid() != parent) Report(report[1], Step::kParentDied, 0);
    }
    // Into the cgroup before anything of the program runs.
    if (options.cgroup_procs_fd >= 0 && ::write(options.cgroup_procs_fd, "0", 1) != 1) {
      Report(report[1], Step::kCgroup, errno);
    }
    if (!options.cpus.empty() && ::sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
      Report(report[1], Step::kAffinity, errno);
    }
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    int in_fd = ::open(input.c_str(), O_RDONLY);
    if (in_fd < 0) Report(report[1], Step::kStdin, errno);
    ::dup2(in_fd, STDIN_FILENO);
    if (in_fd > STDERR_FILENO) ::close(in_fd);
    if (out_fd >= 0) ::dup2(out_fd, STDOUT_FILENO);
    if (err_fd >= 0) ::dup2(err_fd, STDERR_FILENO);
    if (close_fds) MarkInheritedFdsCloexec(hygiene);
    if (options.umask) ::umask(*options.umask);
    if (options.no_core_dumps) DisableCoreDumpLimit();
    if (!workdir.empty() && ::chdir(workdir.c_str()) != 0) {
      Report(report[1], Step::kWorkdir, errno);
    }
    ::execvpe(program.c_str(), argv.data(), envp.data());
    Report(report[1], Step::kExec, errno);
  }
  ::close(report[1]);
  // Also here, so the group exists before the caller ever signals it.
  if (!detach && options.placement == ProcessPlacement::kOwnGroup) ::setpgid(pid, pid);
  int status = 0;
  if (detach) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  ChildFailure failure{};
  ssize_t got;
  do {
    got = ::read(report[0], &failure, sizeof(failure));
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got == static_cast<ssize_t>(sizeof(failure))) {
    if (!detach) {
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    return DescribeFailure(options, program, failure);
  }
  if (detach) {
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return Internal(fmt::format("could not start {} in its own session", program));
    }
    return pid_t{0};
  }
  return pid;
}

// Reads the pipes (when there are any) and waits for `pid`, polling should_stop; on a stop,
// ends its process group (SIGTERM, SIGKILL 2 s later). When the program exits, whatever it left
// in its group is killed while the leader is still an unreaped zombie (so the group id cannot
// have been reused), then it is reaped.
Status WaitOrStop(pid_t pid, const SubprocessOptions& options, int pipes[2], std::string* out[2],
                  int* status) {
  int64_t kill_at = -1;
  int64_t exited_at = -1;
  const bool own_group = options.placement == ProcessPlacement::kOwnGroup;
  auto open_pipes = [&] { return (pipes[0] >= 0 ? 1 : 0) + (pipes[1] >= 0 ? 1 : 0); };
  for (int64_t waited_ms = 0;; waited_ms += 100) {
    if (exited_at < 0) {
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 &&
          errno != EINTR) {
        return ErrnoStatus("waitid", errno);
      }
      if (info.si_pid == pid) {
        if (own_group) ::killpg(pid, SIGKILL);  // anything it left running in its group
        while (::waitpid(pid, status, 0) < 0 && errno == EINTR) {
        }
        exited_at = waited_ms;
      }
    }
    if (exited_at >= 0 && (open_pipes() == 0 || waited_ms - exited_at >= kDrainAfterExitMs)) {
      break;
    }
    if (exited_at < 0 && options.should_stop) {
      if (kill_at < 0 && options.should_stop()) {
        own_group ? ::killpg(pid, SIGTERM) : ::kill(pid, SIGTERM);
        kill_at = waited_ms + 2000;
      } else if (kill_at >= 0 && waited_ms >= kill_at) {
        own_group ? ::killpg(pid, SIGKILL) : ::kill(pid, SIGKILL);
      }
    }
    if (open_pipes() == 0) {
      ::usleep(100'000);
      continue;
    }
    pollfd fds[2] = {{pipes[0], POLLIN, 0}, {pipes[1], POLLIN, 0}};
    if (::poll(fds, 2, 100) <= 0) continue;
    bool read_any = false;
    for (int i = 0; i < 2; ++i) {
      if (pipes[i] < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[8192];
      ssize_t n = ::read(pipes[i], buf, sizeof(buf));
      if (n > 0) {
        out[i]->append(buf, static_cast<size_t>(n));
        read_any = true;
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(pipes[i]);
        pipes[i] = -1;
      }
    }
    if (read_any) waited_ms -= 100;  // not a full period
  }
  for (int i = 0; i < 2; ++i) {
    if (pipes[i] >= 0) ::close(pipes[i]);
  }
  if (kill_at >= 0) {
    return Cancelled(
        fmt::format("{} was stopped because the run is being canceled", options.argv[0]));
  }
  return Status::Ok();
}

SubprocessResult ResultFromWaitStatus(int status) {
  SubprocessResult result;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

Result<int> OpenOutput(const std::string& path) {
  return OpenOwnFileForWrite(path, O_CREAT | O_APPEND, 0644, "output file");
}

// Two pipes for stdout and stderr (read ends [0], write ends [1]); all -1 on failure.
Status OpenPipes(int out[2], int err[2]) {
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    return ErrnoStatus("pipe", e);
  }
  return Status::Ok();
}

}  // namespace

Result<SubprocessResult> RunSubprocess(const SubprocessOptions& options) {
  int out_fd = -1;
  int err_fd = -1;
  int reads[2] = {-1, -1};
  if (!options.output_path.empty()) {
    AIR_ASSIGN_OR_RETURN(out_fd, OpenOutput(options.output_path));
    err_fd = out_fd;
  } else {
    int out_pipe[2], err_pipe[2] = {-1, -1};
    if (options.separate_stderr) {
      AIR_RETURN_IF_ERROR(OpenPipes(out_pipe, err_pipe));
    } else if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
      return ErrnoStatus("pipe", errno);
    }
    reads[0] = out_pipe[0];
    reads[1] = err_pipe[0];
    out_fd = out_pipe[1];
    err_fd = options.separate_stderr ? err_pipe[1] : out_pipe[1];
  }
  Result<pid_t> started = ForkExec(options, out_fd, err_fd, /*detach=*/false);
  ::close(out_fd);
  if (err_fd != out_fd) ::close(err_fd);
  if (!started.ok()) {
    for (int fd : reads) {
      if (fd >= 0) ::close(fd);
    }
    return started.status();
  }
  SubprocessResult captured;
  std::string* sinks[2] = {&captured.output, &captured.error_output};
  int status = 0;
  AIR_RETURN_IF_ERROR(WaitOrStop(*started, options, reads, sinks, &status));
  SubprocessResult ended = ResultFromWaitStatus(status);
  ended.output = std::move(captured.output);
  ended.error_output = std::move(captured.error_output);
  return ended;
}

Result<RunningSubprocess> StartSubprocess(const SubprocessOptions& options) {
  int out_fd = -1;
  int err_fd = -1;
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  if (!options.output_path.empty()) {
    AIR_ASSIGN_OR_RETURN(out_fd, OpenOutput(options.output_path));
    err_fd = out_fd;
  } else if (!options.inherit_output) {
    AIR_RETURN_IF_ERROR(OpenPipes(out_pipe, err_pipe));
    out_fd = out_pipe[1];
    err_fd = err_pipe[1];
  }
  Result<pid_t> started = ForkExec(options, out_fd, err_fd, /*detach=*/false);
  if (out_fd >= 0) ::close(out_fd);
  if (err_fd >= 0 && err_fd != out_fd) ::close(err_fd);
  if (!started.ok()) {
    if (out_pipe[0] >= 0) ::close(out_pipe[0]);
    if (err_pipe[0] >= 0) ::close(err_pipe[0]);
    return started.status();
  }
  return RunningSubprocess(*started, out_pipe[0], err_pipe[0]);
}

Status StartDetachedSubprocess(const SubprocessOptions& options) {
  if (options.output_path.empty()) {
    return InvalidArgument("StartDetachedSubprocess: give an output_path");
  }
  AIR_ASSIGN_OR_RETURN(int out_fd, OpenOutput(options.output_path));
  Result<pid_t> started = ForkExec(options, out_fd, out_fd, /*detach=*/true);
  ::close(out_fd);
  return started.status();
}

Result<std::optional<SubprocessResult>> RunningSubprocess::Poll() {
  if (reaped_) return InvalidArgument(fmt::format("process {} was already reaped", pid_));
  int status = 0;
  pid_t done;
  do {
    done = ::waitpid(pid_, &status, WNOHANG);
  } while (done < 0 && errno == EINTR);
  if (done < 0) return ErrnoStatus(fmt::format("waitpid {}", pid_), errno);
  if (done == 0) return std::optional<SubprocessResult>();
  reaped_ = true;
  return std::optional<SubprocessResult>(ResultFromWaitStatus(status));
}

void RunningSubprocess::SignalGroup(int sig) const { ::killpg(pid_, sig); }

}  // namespace air
