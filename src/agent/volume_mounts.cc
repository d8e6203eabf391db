// Private mount namespaces with the volume root on /Volumes (see volume_mounts.h).
#include "agent/volume_mounts.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace air::agent {
namespace {

enum class Step { kNone, kMountPoint, kRoot, kUnshare, kIdMap, kPrivate, kBind };

struct Failure {
  Step step = Step::kNone;
  int err = 0;
  bool user_namespace = false;  // the mount namespace is owned by a new user namespace
};

// What Enter may do beyond entering: the agent and a submit-time probe create the mount point
// when missing; a dry-run probe changes nothing outside its own namespaces.
enum class Mode { kEnter, kProbe, kProbeReadOnly };

// Decimal digits of `value` into `out` (async-signal-safe); returns the length.
size_t FormatInt(long value, char* out) {
  char digits[24];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < sizeof(digits));
  for (size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  return n;
}

bool WriteProcFile(const char* path, const char* data, size_t size) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, data, size) == static_cast<ssize_t>(size);
  int err = errno;
  ::close(fd);
  errno = err;
  return ok;
}

// "<id> <id> 1": the caller's own id maps to itself inside the user namespace.
bool MapOwnId(const char* path, long id) {
  char line[64];
  size_t n = FormatInt(id, line);
  line[n++] = ' ';
  n += FormatInt(id, line + n);
  line[n++] = ' ';
  line[n++] = '1';
  return WriteProcFile(path, line, n);
}

// Only system calls, so the probe's forked child can run it.
Failure Enter(const char* root, const char* mount_point, Mode mode) {
  struct stat st {};
  bool bind_source_is_mount_point = false;
  int root_error = ::stat(root, &st) != 0 ? errno : (S_ISDIR(st.st_mode) ? 0 : ENOTDIR);
  if (root_error != 0) {
    if (mode != Mode::kProbeReadOnly || root_error != ENOENT) return {Step::kRoot, root_error};
    bind_source_is_mount_point = true;  // created at submit; any directory tests the bind
  }
  bool mount_point_missing = false;
  if (mode == Mode::kProbeReadOnly) {
    if (::stat(mount_point, &st) != 0) {
      if (errno != ENOENT || ::getuid() != 0) return {Step::kMountPoint, errno};
      mount_point_missing = true;  // root creates it at submit
    }
  } else if (::mkdir(mount_point, 0755) != 0 && errno != EEXIST) {
    return {Step::kMountPoint, errno};
  }
  if (!mount_point_missing) {
    if (::stat(mount_point, &st) != 0) return {Step::kMountPoint, errno};
    if (!S_ISDIR(st.st_mode)) return {Step::kMountPoint, ENOTDIR};
  }
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  Failure done;
  if (::unshare(CLONE_NEWNS) != 0) {
    if (errno != EPERM || uid == 0) return {Step::kUnshare, errno};
    // Not privileged: a user namespace owns the new mount namespace.
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return {Step::kUnshare, errno};
    if (!WriteProcFile("/proc/self/setgroups", "deny", 4) ||
        !MapOwnId("/proc/self/uid_map", static_cast<long>(uid)) ||
        !MapOwnId("/proc/self/gid_map", static_cast<long>(gid))) {
      return {Step::kIdMap, errno, true};
    }
    done.user_namespace = true;
  }
  // Nothing mounted here may propagate back to the host (systemd makes "/" shared).
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return {Step::kPrivate, errno, done.user_namespace};
  }
  if (mount_point_missing) return done;
  const char* source = bind_source_is_mount_point ? mount_point : root;
  if (::mount(source, mount_point, nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return {Step::kBind, errno, done.user_namespace};
  }
  return done;
}

Status Describe(const Failure& failure, const std::string& root, const std::string& mount_point) {
  const char* why = std::strerror(failure.err);
  switch (failure.step) {
    case Step::kNone:
      return Status::Ok();
    case Step::kRoot:
      return FailedPrecondition(
          fmt::format("the volume root {} is not a directory: {}", root, why));
    case Step::kMountPoint:
      return FailedPrecondition(fmt::format(
          "cannot use {} as the mount point for volumes: {} (create the empty directory once, "
          "e.g. `sudo mkdir {}`)",
          mount_point, why, mount_point));
    case Step::kUnshare:
      return FailedPrecondition(fmt::format(
          "cannot create a private mount namespace to show {} at {}: {} (this machine allows "
          "neither mount nor user namespaces to this user)",
          root, mount_point, why));
    case Step::kIdMap:
      return FailedPrecondition(fmt::format(
          "cannot create a private mount namespace to show {} at {}: the new user namespace "
          "refused this user's uid/gid map: {}",
          root, mount_point, why));
    case Step::kPrivate:
    case Step::kBind:
      return FailedPrecondition(
          fmt::format("cannot bind-mount the volume root {} on {}: {}", root, mount_point, why));
  }
  return Internal("unknown volume mount step");
}

}  // namespace

Status EnterVolumeNamespace(const std::string& root, const std::string& mount_point) {
  return Describe(Enter(root.c_str(), mount_point.c_str(), Mode::kEnter), root, mount_point);
}

Result<VolumeNamespaceKind> ProbeVolumeNamespace(const std::string& root,
                                                 const VolumeProbeOptions& options) {
  const Mode mode = options.may_create ? Mode::kProbe : Mode::kProbeReadOnly;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return ErrnoStatus("fork", err);
  }
  if (pid == 0) {
    // The agent is dumpable when it enters its namespace (it turns dumps off after).
    if (::prctl(PR_GET_DUMPABLE) != 1) ::prctl(PR_SET_DUMPABLE, 1);
    Failure failure = Enter(root.c_str(), options.mount_point.c_str(), mode);
    (void)!::write(fds[1], &failure, sizeof(failure));
    ::_exit(0);
  }
  ::close(fds[1]);
  Failure failure{Step::kUnshare, ECHILD};
  ssize_t n;
  do {
    n = ::read(fds[0], &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof(failure))) failure = {Step::kUnshare, ECHILD};
  AIR_RETURN_IF_ERROR(Describe(failure, root, options.mount_point));
  return failure.user_namespace ? VolumeNamespaceKind::kUserAndMount : VolumeNamespaceKind::kMount;
}

}  // namespace air::agent
