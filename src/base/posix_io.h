// Small POSIX helpers shared by the runtime, the agent and the Env: writing a whole buffer to a
// file descriptor, reading a small file whole, opening a file air writes to without following a
// planted symlink or appending to another user's file, and building a child process's environment
// from the current one. Thread safety: pure functions over their arguments (MergedEnvironment reads
// `environ`, which must not be modified concurrently).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace air {

// Writes all of `data` to `fd`, retrying short writes and EINTR. `what` names the destination
// in the error ("write <what>: <strerror>").
Status WriteFully(int fd, std::string_view data, const std::string& what);

// The whole of a small file (/proc and cgroup files, read in one pass; at most `max_bytes`, the
// rest left unread), retrying EINTR; nullopt when it cannot be opened.
std::optional<std::string> ReadSmallFile(const std::string& path, size_t max_bytes = 1 << 20);

// Opens `path` for writing (`flags`: O_APPEND or O_TRUNC, plus O_CREAT to create it with `mode`)
// with O_NOFOLLOW and O_CLOEXEC, and keeps it only when it is a regular file of this user (or a
// character device, which only root can create: /dev/null): a symlink, a FIFO, or a file another
// user put where air writes (a node log, a daemon's log), is refused with an error that names
// `what` and the path. Returns a blocking descriptor (the caller closes it).
Result<int> OpenOwnFileForWrite(const std::string& path, int flags, mode_t mode,
                                const std::string& what);

// Whether the open `fd` (the file `path`) is a regular file owned by this process's effective
// user, or a character device; the error names `what`, the path, its owner and type otherwise.
Status CheckOwnRegularFile(int fd, const std::string& path, const std::string& what);

// The current process's environment as NAME=VALUE entries, with each of `overrides` replacing
// the variable of the same name (in place, and every inherited copy of it) or added at the end,
// in the given order; when `overrides` names a variable twice, the later value wins.
std::vector<std::string> MergedEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides);

// Pointers into `entries` ending with nullptr, as execve wants them. `entries` must outlive it.
std::vector<char*> EnvironmentPointers(std::vector<std::string>& entries);

}  // namespace air
