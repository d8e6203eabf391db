// fork/exec/wait for helper programs, output to a file or captured through a pipe.
#include "runtime/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
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

// Waits for `pid`, polling should_stop; on a stop, ends its process group.
Status WaitOrStop(pid_t pid, const SubprocessOptions& options, int* status) {
  int64_t kill_at = 0;
  for (int64_t waited_ms = 0;; waited_ms += 100) {
    pid_t done = ::waitpid(pid, status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return ErrnoStatus("waitpid", errno);
    if (kill_at == 0 && options.should_stop()) {
      ::killpg(pid, SIGTERM);
      kill_at = waited_ms + 2000;
    } else if (kill_at != 0 && waited_ms >= kill_at) {
      ::killpg(pid, SIGKILL);
    }
    ::usleep(100'000);
  }
  ::killpg(pid, SIGKILL);  // anything it left running in its group
  if (kill_at != 0) {
    return Cancelled(
        fmt::format("{} was stopped because the run is being canceled", options.argv[0]));
  }
  return Status::Ok();
}

}  // namespace

namespace {

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
  if (pipe_fds[0] >= 0) {
    char buf[8192];
    while (true) {
      ssize_t n = ::read(pipe_fds[0], buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      result.output.append(buf, static_cast<size_t>(n));
    }
    ::close(pipe_fds[0]);
  }
  int status = 0;
  if (options.should_stop && pipe_fds[0] < 0) {
    AIR_RETURN_IF_ERROR(WaitOrStop(pid, options, &status));
  } else {
    while (::waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) return ErrnoStatus("waitpid", errno);
    }
  }
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
