// The project's one process spawner: every program air starts (python -m venv, pip, git, sbatch,
// a node's command, a node agent, air launch's workers, the detached supervisor and tracking
// server) is forked and exec'd here, so what a child gets is decided in one place:
//   - argv and the program (looked up on PATH when it has no '/'), never a shell re-parsing
//     arguments; the caller's environment with overrides; a working directory; stdin from a
//     file or /dev/null;
//   - where it lives: its own process group (default; a stop reaches everything it started),
//     the caller's, or a new session double-forked away from the caller (a daemon);
//   - a parent-death signal (default SIGKILL: a child never runs on unowned), default signal
//     dispositions and mask, optionally every inherited descriptor above stderr closed at exec,
//     the user's umask, no core dumps, a cgroup joined before anything of it runs;
//   - its output appended to a file, captured (together or stdout and stderr apart), handed to
//     the caller as pipes, or inherited.
// An error to start it (no such program, a working directory that cannot be entered, a cgroup
// that cannot be joined) is a Status naming the step and the program; how the program ended is
// a SubprocessResult.
// RunSubprocess runs a program to its end; StartSubprocess starts one and hands back a
// RunningSubprocess to poll and signal; StartDetachedSubprocess starts a daemon and returns.
// Thread safety: stateless; each call forks and waits for its own child only. A
// RunningSubprocess is used by one thread.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace air {

enum class ProcessPlacement {
  kOwnGroup,     // setpgid(0, 0): the child leads a new process group
  kCallerGroup,  // stays in the caller's process group
  kNewSession,   // setsid: for daemons (StartDetachedSubprocess always uses it)
};

struct SubprocessOptions {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH when it has no '/'
  std::string program;            // "" = argv[0]; else the file exec'd with this argv
  std::vector<std::pair<std::string, std::string>> env_overrides;
  std::string workdir;     // "" = the caller's
  std::string stdin_path;  // "" = /dev/null
  ProcessPlacement placement = ProcessPlacement::kOwnGroup;
  // Sent to the child when the thread that started it dies; 0: none (daemons never get one).
  int parent_death_signal = SIGKILL;
  // Every descriptor above stderr the caller inherited is closed at exec (base/fd_hygiene.h).
  bool close_inherited_fds = false;
  std::optional<mode_t> umask;  // the child's umask; nullopt: the caller's
  bool no_core_dumps = false;   // RLIMIT_CORE 0 (the child holds secret values)
  // An open cgroup.procs the child joins (writes "0" to) before it execs; -1: none.
  int cgroup_procs_fd = -1;
  // The child's signal mask; nullopt: none blocked. Dispositions are always the defaults.
  std::optional<sigset_t> signal_mask;
  // The CPUs the child (and what it starts) may run on (sched_setaffinity before exec); empty:
  // the caller's.
  std::vector<int> cpus;
  // Polled every 100 ms while the program runs (RunSubprocess); when it returns true the
  // program's process group gets SIGTERM (SIGKILL 2 s later) and the call returns kCancelled.
  // When the program exits, whatever it left in its group is killed, and captured output is
  // read for at most 1 s more (a process that left the group may hold the pipe forever).
  std::function<bool()> should_stop;
  std::string output_path;  // stdout and stderr appended here; "" = captured / piped
  // RunSubprocess: stderr captured apart from stdout (SubprocessResult::error_output).
  bool separate_stderr = false;
  // StartSubprocess, no output_path: the child writes to the caller's stdout/stderr (else its
  // stdout and stderr come back as RunningSubprocess pipes).
  bool inherit_output = false;
};

struct SubprocessResult {
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string output;        // captured stdout (+ stderr unless separate_stderr)
  std::string error_output;  // captured stderr with separate_stderr

  bool succeeded() const { return exit_code == 0; }
  // "exit code 1" / "signal 9 (KILL)".
  std::string Describe() const;
};

// Runs the program to its end. The Status is about starting it (the program does not exist,
// fork failed); how it ended is in the result.
Result<SubprocessResult> RunSubprocess(const SubprocessOptions& options);

// A program started by StartSubprocess. With kOwnGroup its process group id is its pid.
// Destroying it neither waits nor signals: the owner polls it to the end (or signals it first).
class RunningSubprocess {
 public:
  RunningSubprocess(int pid, int stdout_fd, int stderr_fd)
      : pid_(pid), stdout_fd_(stdout_fd), stderr_fd_(stderr_fd) {}
  int pid() const { return pid_; }
  // The read ends of its stdout and stderr when neither output_path nor inherit_output was
  // given (-1 otherwise); the caller owns and closes them.
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }
  // How it ended, once it has (the child is then reaped); nullopt while it runs.
  Result<std::optional<SubprocessResult>> Poll();
  // Sends `sig` to the program's whole process group: after the program was reaped, to what it
  // left running there.
  void SignalGroup(int sig) const;

 private:
  int pid_;
  int stdout_fd_;
  int stderr_fd_;
  bool reaped_ = false;
};

// Starts the program and returns once it has been exec'd; the Status is about starting it.
Result<RunningSubprocess> StartSubprocess(const SubprocessOptions& options);

// Starts a daemon: a new session, double-forked so the caller is not its parent, stdin from
// /dev/null (or stdin_path), output appended to output_path, every inherited descriptor closed,
// working directory "/" unless workdir is set. Returns once it has been exec'd.
Status StartDetachedSubprocess(const SubprocessOptions& options);

}  // namespace air
