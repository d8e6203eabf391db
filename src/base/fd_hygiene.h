// Descriptor hygiene for exec: every descriptor above stderr is marked close-on-exec in a
// freshly forked child, so no pipe the caller inherited (a shell's $(...), make's jobserver, a
// test harness waiting for EOF) lives on in a supervisor, an agent or a node's command.
//
// close_range(CLOSE_RANGE_CLOEXEC) (Linux 5.11) does it in one call. Where the kernel lacks it
// (ENOSYS, EINVAL) the fallback walks /proc/self/fd with getdents64 and marks each descriptor,
// and without /proc it marks every number below RLIMIT_NOFILE. AIR_TEST_NO_CLOSE_RANGE=1 forces
// the fallback (tests).
// Thread safety: FdHygieneFor is called before fork; MarkInheritedFdsCloexec is
// async-signal-safe (only syscalls, no allocation), for the child between fork and exec.
#pragma once

#include "base/env.h"

namespace air {

struct FdHygiene {
  bool use_close_range = true;
  int max_fd = 1024;  // the fallback's upper bound without /proc
};

FdHygiene FdHygieneFor(Env* env);

// Marks every descriptor >= 3 close-on-exec. Returns 0, or the errno of the fallback's failure.
int MarkInheritedFdsCloexec(const FdHygiene& hygiene);

}  // namespace air
