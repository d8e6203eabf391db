// Process-wide protections and limits of air's own processes (docs/security.md):
//   - private files: umask 077 for everything air writes under AIR_HOME (logs, launch files,
//     parameters, the store, environments), the caller's own umask remembered in
//     AIR_USER_UMASK so a node's command creates its files as the user expects;
//   - no core dumps from a process that holds secret values: RLIMIT_CORE 0 (soft and hard, so
//     the command cannot raise it) and, for air's own processes, PR_SET_DUMPABLE 0 (no core,
//     no ptrace attach, /proc/<pid>/environ and mem readable by root only);
//   - the CPUs the process may run on (its affinity mask), which the local backend splits
//     among the nodes it simulates and the engine sizes its thread pool by.
// Thread safety: each call changes process-wide state; call from the main thread at startup
// (or in a child between fork and exec for the async-signal-safe ones).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"

namespace air {

inline constexpr char kUserUmaskVar[] = "AIR_USER_UMASK";

// Sets umask 077 for this process; the first call in a process tree records the umask it
// replaced in AIR_USER_UMASK (inherited by every process air starts).
void UsePrivateUmask();

// The user's umask recorded by UsePrivateUmask (nullopt when none was recorded).
std::optional<mode_t> UserUmask(Env* env);

// RLIMIT_CORE 0 (async-signal-safe).
void DisableCoreDumpLimit();
// DisableCoreDumpLimit plus PR_SET_DUMPABLE 0: for air's own processes holding secret values.
void DisableCoreDumps();

// The CPUs this process may run on (its affinity mask: taskset, cgroup cpusets), ascending;
// empty when the mask cannot be read.
std::vector<int> AllowedCpus();

}  // namespace air
