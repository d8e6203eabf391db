// Failure summaries (docs/state-machine.md): the attempt's first alert (a known fatal line:
// CUDA out of memory, an NCCL watchdog timeout, ...; docs/alerts.md) when there is one, then one
// line naming the node and how it ended — exit
// code, or signal with a hint ("signal 9 (SIGKILL): killed — out of memory?") — then, for a
// Python worker, the root cause (its exception line, not the launcher's banner), then the
// last lines of that node's log, so `air get` explains a failure without opening files.
// Thread safety: pure functions (LastLogLines reads a file).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/node_launch.h"
#include "runtime/alerts.h"

namespace air::runtime {

// "exited with code 3", "was killed by signal 9 (SIGKILL): killed — out of memory?".
std::string DescribeNodeEnding(const agent::NodeExitReport& report);

// The text of the last `count` output lines (stdout/stderr records) of a node log, one per
// line, each prefixed by "  ". Only the end of the log is read, and a very long line is cut
// (saying how many bytes were left out). "" when the log is empty or unreadable.
std::string LastLogLines(const std::string& log_path, size_t count);

// The root cause of a Python worker's failure, from a node's output lines: the exception line
// of the first traceback in the log (the first rank to fail prints first; torchrun's own
// ChildFailedError is skipped), with the rank and exit code of torchrun's "Root Cause (first
// observed failure)" block when there is one. nullopt when the output holds no traceback.
struct RootCause {
  std::string exception;  // "ModuleNotFoundError: No module named 'x'"
  std::string rank;       // "1 (local_rank: 1)" or ""
  std::string exit;       // "1 (pid: 1234)" or ""
};
std::optional<RootCause> FindRootCause(const std::vector<std::string>& lines);

// "node 1 exited with code 3\nlast lines of node 1 (attempt 0):\n  ..."
std::string NodeFailureSummary(int node_rank, int attempt, const std::string& ending,
                               const std::string& log_path);

// The summary led by the attempt's first alert (docs/alerts.md), when there is one:
// "first alert: CUDA out of memory on node 1, rank 3 (tried 2.00 GiB, ...) at <time>\n  <line>\n"
// then `summary`.
std::string SummaryWithFirstAlert(const std::string& summary, const std::optional<Alert>& first);

}  // namespace air::runtime
