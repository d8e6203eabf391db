// close_range(CLOEXEC) with a getdents64 fallback.
#include "base/fd_hygiene.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace air {

FdHygiene FdHygieneFor(Env* env) {
  FdHygiene h;
  if (auto v = env->GetEnv("AIR_TEST_NO_CLOSE_RANGE"); v && *v == "1") h.use_close_range = false;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    h.max_fd = static_cast<int>(lim.rlim_cur < (1u << 20) ? lim.rlim_cur : (1u << 20));
  }
  return h;
}

int MarkInheritedFdsCloexec(const FdHygiene& hygiene) {
  if (hygiene.use_close_range &&
      ::syscall(SYS_close_range, 3U, ~0U, static_cast<unsigned>(CLOSE_RANGE_CLOEXEC)) == 0) {
    return 0;
  }
  int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    for (int fd = 3; fd < hygiene.max_fd; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    return 0;
  }
  alignas(8) char buf[4096];
  while (true) {
    long n = ::syscall(SYS_getdents64, dir, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(dir);
      return err;
    }
    if (n == 0) break;
    for (long off = 0; off < n;) {
      // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
      unsigned short reclen = 0;
      __builtin_memcpy(&reclen, buf + off + 16, sizeof(reclen));
      const char* name = buf + off + 19;
      int fd = 0;
      bool digits = *name != '\0';
      for (const char* p = name; *p != '\0'; ++p) {
        if (*p < '0' || *p > '9') {
          digits = false;
          break;
        }
        fd = fd * 10 + (*p - '0');
      }
      if (digits && fd >= 3 && fd != dir) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      off += reclen;
    }
  }
  ::close(dir);
  return 0;
}

}  // namespace air
