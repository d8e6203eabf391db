// flock(2)-based inter-process lock.
#include "secrets/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

namespace air::secrets {

Result<FileLock> FileLock::Acquire(const std::string& path, Mode mode) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus("open lock file " + path, errno);
  int op = mode == Mode::kExclusive ? LOCK_EX : LOCK_SH;
  while (::flock(fd, op) != 0) {
    if (errno == EINTR) continue;
    int err = errno;
    ::close(fd);
    return ErrnoStatus("lock " + path, err);
  }
  return FileLock(fd);
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace air::secrets
