// Reading the process table from /proc: a process's parent, group and start time, and the
// descendants or group members of a process. The agent uses it to leave no process of a node
// behind (including ones that left the node's process group), the supervisor and the CLI to
// tell a live supervisor from a reused pid.
// Thread safety: stateless functions.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace air::agent {

struct ProcStat {
  pid_t pid = 0;
  char state = '?';  // R, S, D, Z (zombie), T, ...
  pid_t ppid = 0;
  pid_t pgid = 0;
  pid_t sid = 0;
  uint64_t start_ticks = 0;  // since boot, in clock ticks: with pid, identifies a process
};

// nullopt when the process does not exist (or is gone while reading).
std::optional<ProcStat> ReadProcStat(pid_t pid);

std::vector<ProcStat> ListProcesses();

// Every live (non-zombie) descendant of `root`, found by following parent links.
std::vector<pid_t> DescendantsOf(pid_t root);

// Every live (non-zombie) member of process group `pgid`.
std::vector<pid_t> MembersOfGroup(pid_t pgid);

// True when `pid` exists, is not a zombie and (when given) started at `start_ticks`.
bool IsSameProcessAlive(pid_t pid, std::optional<uint64_t> start_ticks);

// Sends `sig` to the process `pid` only if it is still the one that started at `start_ticks`:
// the check and the signal go through a pidfd, so a pid reused in between is never signalled
// (without pidfd_open, kernel < 5.3, the start time is checked just before kill). False when
// the process is gone or is another one.
bool SignalSameProcess(pid_t pid, uint64_t start_ticks, int sig);

// Every live descendant of `root` with its start time (for SignalSameProcess).
std::vector<ProcStat> DescendantStatsOf(pid_t root);

}  // namespace air::agent
