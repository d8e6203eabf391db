// Running helper programs to completion (python -m venv, pip, git): fork/exec with a chosen
// argv, environment additions, working directory, and stdout+stderr appended to a log file or
// captured. No shell is involved, so arguments are never re-parsed.
// Thread safety: stateless; each call forks and waits for its own child only.
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

}  // namespace air::runtime
