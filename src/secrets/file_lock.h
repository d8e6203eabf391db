// FileLock: an advisory flock(2) on a lock file, held for the lifetime of the object, that
// serialises read-modify-write cycles of the secret store across processes and threads (each
// FileLock opens its own file description, so two in one process also exclude each other).
// Movable, not copyable; not shared between threads.
#pragma once

#include <string>

#include "base/status.h"

namespace air::secrets {

class FileLock {
 public:
  enum class Mode { kShared, kExclusive };

  // Opens (creating with mode 0600 if needed) `path` and blocks until the lock is granted.
  static Result<FileLock> Acquire(const std::string& path, Mode mode);

  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace air::secrets
