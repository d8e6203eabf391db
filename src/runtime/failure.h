// Failure summaries (docs/state-machine.md): one line naming the node and how it ended — exit
// code, or signal with a hint ("signal 9 (SIGKILL): killed — out of memory?") — followed by the
// last lines of that node's log, so `air get` explains a failure without opening files.
// Thread safety: pure functions (LastLogLines reads a file).
#pragma once

#include <string>

#include "agent/node_launch.h"

namespace air::runtime {

// "exited with code 3", "was killed by signal 9 (SIGKILL): killed — out of memory?".
std::string DescribeNodeEnding(const agent::NodeExitReport& report);

// The text of the last `count` output lines (stdout/stderr records) of a node log, one per
// line, each prefixed by "  ". Only the end of the log is read, and a very long line is cut
// (saying how many bytes were left out). "" when the log is empty or unreadable.
std::string LastLogLines(const std::string& log_path, size_t count);

// "node 1 exited with code 3\nlast lines of node 1 (attempt 0):\n  ..."
std::string NodeFailureSummary(int node_rank, int attempt, const std::string& ending,
                               const std::string& log_path);

}  // namespace air::runtime
