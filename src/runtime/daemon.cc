// Double-fork + setsid launch of `air supervise`.
#include "runtime/daemon.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "base/env.h"
#include "base/fd_hygiene.h"

namespace air::runtime {

Result<std::string> CurrentExecutable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ErrnoStatus("readlink /proc/self/exe", errno);
  return std::string(buf, static_cast<size_t>(n));
}

Status StartDetachedSupervisor(const std::string& air_binary, int64_t run_id,
                               const std::string& air_home, const std::string& log_path) {
  return StartDetachedAir(
      air_binary, {"supervise", std::to_string(run_id), "--air-home", air_home}, log_path,
      fmt::format("the supervisor ({} supervise {}; log {})", air_binary, run_id, log_path));
}

Status StartDetachedAir(const std::string& air_binary, const std::vector<std::string>& args,
                        const std::string& log_path, const std::string& what) {
  std::vector<std::string> storage = {"air"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // The grandchild reports an exec failure (errno) through this pipe; a successful exec closes
  // it (O_CLOEXEC), so EOF means the supervisor runs.
  const FdHygiene hygiene = FdHygieneFor(DefaultEnv());
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  pid_t child = ::fork();
  if (child < 0) {
    int err = errno;
    ::close(report[0]);
    ::close(report[1]);
    return ErrnoStatus("fork", err);
  }
  if (child == 0) {
    ::close(report[0]);
    ::setsid();
    pid_t grandchild = ::fork();
    if (grandchild != 0) ::_exit(grandchild < 0 ? 1 : 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0) {
      int err = errno;
      (void)!::write(report[1], &err, sizeof(err));
      ::_exit(127);
    }
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    if (in > STDERR_FILENO) ::close(in);
    if (out > STDERR_FILENO) ::close(out);
    // Nothing else the CLI's caller left open (a pipe it waits on for EOF, make's jobserver)
    // may live on in the supervisor and its nodes: everything above stderr closes at exec
    // (the report pipe already does).
    MarkInheritedFdsCloexec(hygiene);
    if (::chdir("/") != 0) {
      // Not fatal: the supervisor uses absolute paths only.
    }
    ::execv(air_binary.c_str(), argv.data());
    int err = errno;
    (void)!::write(report[1], &err, sizeof(err));
    ::_exit(127);
  }
  ::close(report[1]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  int exec_errno = 0;
  ssize_t got;
  do {
    got = ::read(report[0], &exec_errno, sizeof(exec_errno));
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got == static_cast<ssize_t>(sizeof(exec_errno))) {
    return ErrnoStatus("start " + what, exec_errno);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Internal("could not fork " + what);
  }
  return Status::Ok();
}

}  // namespace air::runtime
