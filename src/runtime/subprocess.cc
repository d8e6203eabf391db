// fork/exec/wait for helper programs, output to a file or captured through a pipe.
#include "runtime/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/posix_io.h"

namespace air::runtime {

std::string SubprocessResult::Describe() const {
  if (signal) return fmt::format("signal {} ({})", *signal, sigabbrev_np(*signal));
  if (exit_code) return fmt::format("exit code {}", *exit_code);
  return "no exit status";
}

namespace {

// How long output is still read after the program exited: a process it left outside its group
// (setsid) may hold the pipe open forever.
constexpr int kDrainAfterExitMs = 1000;

// Reads the pipe (when there is one) and waits for `pid`, polling should_stop; on a stop, ends
// its process group (SIGTERM, SIGKILL 2 s later). When the program exits, whatever it left in
// its group is killed while the leader is still an unreaped zombie (so the group id cannot
// have been reused), then it is reaped.
Status WaitOrStop(pid_t pid, const SubprocessOptions& options, int pipe_fd, std::string* output,
                  int* status) {
  int64_t kill_at = -1;
  int64_t exited_at = -1;
  for (int64_t waited_ms = 0;; waited_ms += 100) {
    if (exited_at < 0) {
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 &&
          errno != EINTR) {
        return ErrnoStatus("waitid", errno);
      }
      if (info.si_pid == pid) {
        ::killpg(pid, SIGKILL);  // anything it left running in its group
        while (::waitpid(pid, status, 0) < 0 && errno == EINTR) {
        }
        exited_at = waited_ms;
      }
    }
    if (exited_at >= 0 && (pipe_fd < 0 || waited_ms - exited_at >= kDrainAfterExitMs)) break;
    if (exited_at < 0 && options.should_stop) {
      if (kill_at < 0 && options.should_stop()) {
        ::killpg(pid, SIGTERM);
        kill_at = waited_ms + 2000;
      } else if (kill_at >= 0 && waited_ms >= kill_at) {
        ::killpg(pid, SIGKILL);
      }
    }
    if (pipe_fd >= 0) {
      pollfd fd = {pipe_fd, POLLIN, 0};
      int ready = ::poll(&fd, 1, 100);
      if (ready > 0) {
        char buf[8192];
        ssize_t n = ::read(pipe_fd, buf, sizeof(buf));
        if (n > 0) {
          output->append(buf, static_cast<size_t>(n));
          waited_ms -= 100;  // not a full period
          continue;
        }
        if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          ::close(pipe_fd);
          pipe_fd = -1;
        }
      }
    } else {
      ::usleep(100'000);
    }
  }
  if (pipe_fd >= 0) ::close(pipe_fd);
  if (kill_at >= 0) {
    return Cancelled(
        fmt::format("{} was stopped because the run is being canceled", options.argv[0]));
  }
  return Status::Ok();
}

// Forks and execs the program with stdout and stderr on `out_fd` (-1: the caller's), in its own
// process group; returns its pid once exec succeeded. Closes nothing of the caller's.
Result<pid_t> ForkExec(const SubprocessOptions& options, int out_fd) {
  if (options.argv.empty()) return InvalidArgument("RunSubprocess: empty argv");
  std::vector<std::string> entries = MergedEnvironment(options.env_overrides);
  std::vector<char*> envp = EnvironmentPointers(entries);
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Tell an exec failure apart from the program's own exit code 127.
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(exec_pipe[0]);
    ::close(exec_pipe[1]);
    return ErrnoStatus("fork", err);
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group, so a stop reaches everything it started
    // If the caller (a run's supervisor, air launch) dies, the child dies with it rather than
    // running on unowned; the check covers a parent that died before prctl took effect.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const char* input = options.stdin_path.empty() ? "/dev/null" : options.stdin_path.c_str();
    int in_fd = ::open(input, O_RDONLY);
    if (in_fd < 0) {
      int err = errno;
      (void)!::write(exec_pipe[1], &err, sizeof(err));
      ::_exit(127);
    }
    ::dup2(in_fd, STDIN_FILENO);
    if (out_fd >= 0) {
      ::dup2(out_fd, STDOUT_FILENO);
      ::dup2(out_fd, STDERR_FILENO);
    }
    if (!options.workdir.empty() && ::chdir(options.workdir.c_str()) != 0) {
      int err = errno;
      (void)!::write(exec_pipe[1], &err, sizeof(err));
      ::_exit(127);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    int err = errno;
    (void)!::write(exec_pipe[1], &err, sizeof(err));
    ::_exit(127);
  }
  ::close(exec_pipe[1]);
  int exec_errno = 0;
  ssize_t got;
  do {
    got = ::read(exec_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (got < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof(exec_errno))) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return ErrnoStatus(fmt::format("run {}", options.argv[0]), exec_errno);
  }
  return pid;
}

SubprocessResult ResultFromWaitStatus(int status) {
  SubprocessResult result;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

Result<int> OpenOutput(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("open " + path, errno);
  return fd;
}

}  // namespace

Result<SubprocessResult> RunSubprocess(const SubprocessOptions& options) {
  int out_fd = -1;
  int pipe_fds[2] = {-1, -1};
  if (!options.output_path.empty()) {
    AIR_ASSIGN_OR_RETURN(out_fd, OpenOutput(options.output_path));
  } else {
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
    out_fd = pipe_fds[1];
  }
  Result<pid_t> started = ForkExec(options, out_fd);
  ::close(out_fd);
  if (!started.ok()) {
    if (pipe_fds[0] >= 0) ::close(pipe_fds[0]);
    return started.status();
  }
  const pid_t pid = *started;
  SubprocessResult result;
  int status = 0;
  AIR_RETURN_IF_ERROR(WaitOrStop(pid, options, pipe_fds[0], &result.output, &status));
  SubprocessResult ended = ResultFromWaitStatus(status);
  ended.output = std::move(result.output);
  return ended;
}

Result<RunningSubprocess> StartSubprocess(const SubprocessOptions& options) {
  int out_fd = -1;
  if (!options.output_path.empty()) {
    AIR_ASSIGN_OR_RETURN(out_fd, OpenOutput(options.output_path));
  } else if (!options.inherit_output) {
    return InvalidArgument("StartSubprocess: give an output_path or inherit_output");
  }
  Result<pid_t> started = ForkExec(options, out_fd);
  if (out_fd >= 0) ::close(out_fd);
  if (!started.ok()) return started.status();
  return RunningSubprocess(*started);
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

}  // namespace air::runtime
