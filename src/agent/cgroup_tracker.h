// The cgroup side of process tracking (agent/process_tracker.h): finding the hierarchy this
// process lives in (a cgroup v2 mount, also the hybrid layout's /sys/fs/cgroup/unified, or a
// v1 freezer mount; the v1 memory controller's, agent/oom_watch.h) from /proc/self/mountinfo
// and /proc/self/cgroup, creating and removing a node's cgroups, and killing every member of one
// without signalling a reused pid. Thread safety: stateless functions.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "agent/process_tracker.h"
#include "base/env.h"
#include "base/status.h"

namespace air::agent::cgroup {

// The directory of this process's own cgroup in the hierarchy of `kind` (kCgroup2 or kFreezer),
// or an error saying why there is none (no such mount, a path outside the mount).
Result<std::string> OwnCgroupDir(TrackerKind kind);
// The directory of this process's cgroup in the v1 memory controller's hierarchy (hybrid and v1
// hosts), or an error saying why there is none.
Result<std::string> OwnV1MemoryDir();

// Creates `parent/name` and reports whether this process may manage it (mkdir worked and the
// control files are writable).
Status CreateCgroup(const std::string& dir);

// Writes `pid` (0: the caller) to dir/cgroup.procs.
Status JoinCgroup(const std::string& dir, pid_t pid);

// The pids in `dir` and every cgroup below it.
std::vector<pid_t> Members(const std::string& dir);

// Sends `sig` to every member of `dir` (recursively) that is still a member when signalled
// (through pidfds); returns how many it reached.
int SignalMembers(const std::string& dir, int sig);

// Kills every member of `dir` and the cgroups below it (cgroup.kill; else frozen, killed,
// thawed) and waits up to `wait_micros` until none is left. Returns how many it found.
Result<int> KillAll(TrackerKind kind, const std::string& dir, Env* env, int64_t wait_micros);

// rmdir of `dir` and the cgroups below it (they must be empty); a missing `dir` is fine.
Status Remove(const std::string& dir);

}  // namespace air::agent::cgroup
