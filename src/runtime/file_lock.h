// FileLock: an flock(2) on a lock file, held for the object's lifetime, shared or exclusive.
// Used where separate air processes must take turns: building one Python environment
// (envs/<key>.lock) and retention against runs being submitted or prepared (AIR_HOME/gc.lock:
// submit and preparation hold it shared, `air delete` and `air gc` exclusive).
// Thread safety: one owner; the kernel arbitrates between processes.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <string>

#include "base/status.h"

namespace air::runtime {

class FileLock {
 public:
  enum class Mode { kShared, kExclusive };

  // Waits for the lock, polling `should_stop` (when set) every 100 ms; kCancelled when it says
  // stop.
  static Result<FileLock> Acquire(const std::string& path,
                                  const std::function<bool()>& should_stop = {},
                                  Mode mode = Mode::kExclusive) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return ErrnoStatus("open lock " + path, errno);
    const int op = (mode == Mode::kShared ? LOCK_SH : LOCK_EX) | LOCK_NB;
    while (::flock(fd, op) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        int err = errno;
        ::close(fd);
        return ErrnoStatus("lock " + path, err);
      }
      if (should_stop && should_stop()) {
        ::close(fd);
        return Cancelled("stopped waiting for " + path + ": the run is being canceled");
      }
      ::usleep(100'000);
    }
    return FileLock(fd);
  }
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock
  }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace air::runtime
