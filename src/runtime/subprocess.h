// The project's one process spawner. RunSubprocess runs a helper program to completion (python
// -m venv, pip, git); StartSubprocess starts one and hands back a RunningSubprocess to poll and
// signal (air launch's workers). Both fork/exec with a chosen argv, environment additions and
// working directory, in the child's own process group, with stdout+stderr appended to a log
// file, captured (RunSubprocess only) or inherited. No shell is involved, so arguments are never
// re-parsed. The child gets SIGKILL if the thread that started it dies.
// Thread safety: stateless; each call forks and waits for its own child only. A
// RunningSubprocess is used by one thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace air::runtime {

struct SubprocessOptions {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH when it has no '/'
  std::vector<std::pair<std::string, std::string>> env_overrides;
  std::string workdir;     // "" = the caller's
  std::string stdin_path;  // "" = /dev/null
  // Polled every 100 ms while the program runs (whether its output goes to a file or is
  // captured through a pipe); when it returns true the program's process group gets SIGTERM
  // (SIGKILL 2 s later) and the call returns kCancelled. When the program exits, whatever it
  // left in its group is killed, and captured output is read for at most 1 s more (a process
  // that left the group may hold the pipe forever).
  std::function<bool()> should_stop;
  std::string output_path;  // stdout and stderr appended here; "" = captured in the result
  // StartSubprocess only: with no output_path, the child writes to the caller's stdout/stderr.
  bool inherit_output = false;
};

struct SubprocessResult {
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string output;  // captured stdout+stderr when no output_path was given

  bool succeeded() const { return exit_code == 0; }
  // "exit code 1" / "signal 9 (KILL)".
  std::string Describe() const;
};

// The Status is about starting it (the program does not exist, fork failed); how it ended is in
// the result.
Result<SubprocessResult> RunSubprocess(const SubprocessOptions& options);

// A program started by StartSubprocess; its process group id is its pid. Destroying it neither
// waits nor signals: the owner polls it to the end (or signals it first).
class RunningSubprocess {
 public:
  explicit RunningSubprocess(int pid) : pid_(pid) {}
  int pid() const { return pid_; }
  // How it ended, once it has (the child is then reaped); nullopt while it runs.
  Result<std::optional<SubprocessResult>> Poll();
  // Sends `sig` to the program's whole process group: after the program was reaped, to what it
  // left running there.
  void SignalGroup(int sig) const;

 private:
  int pid_;
  bool reaped_ = false;
};

// Starts the program (output_path or inherit_output; captured output is RunSubprocess's) and
// returns once it has been exec'd; the Status is about starting it, as for RunSubprocess.
Result<RunningSubprocess> StartSubprocess(const SubprocessOptions& options);

}  // namespace air::runtime
