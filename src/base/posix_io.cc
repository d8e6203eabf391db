// POSIX helpers: full writes, files air writes to, child environments.
#include "base/posix_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

extern char** environ;

namespace air {

std::optional<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string data;
  char buf[8192];
  while (data.size() < max_bytes) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof(buf), max_bytes - data.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
}

Status CheckOwnRegularFile(int fd, const std::string& path, const std::string& what) {
  struct stat sb;
  if (::fstat(fd, &sb) != 0) return ErrnoStatus("stat " + what + " " + path, errno);
  // A device only root can create (/dev/null, /dev/full): not something another user planted.
  if (S_ISCHR(sb.st_mode)) return Status::Ok();
  if (!S_ISREG(sb.st_mode)) {
    return PermissionDenied(fmt::format(
        "{} {} is not a regular file; air writes only to a file it creates or one you own", what,
        path));
  }
  if (sb.st_uid != ::geteuid()) {
    return PermissionDenied(fmt::format(
        "{} {} belongs to uid {} (mode {:04o}), not to you (uid {}): another user may have put it "
        "there; air writes only to a file you own (remove it)",
        what, path, sb.st_uid, static_cast<unsigned>(sb.st_mode & 07777), ::geteuid()));
  }
  return Status::Ok();
}

Result<int> OpenOwnFileForWrite(const std::string& path, int flags, mode_t mode,
                                const std::string& what) {
  // O_NONBLOCK: a FIFO planted there fails (ENXIO) instead of blocking until someone reads it.
  const int fd = ::open(path.c_str(), flags | O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
  if (fd < 0) {
    if (errno == ELOOP) {
      return PermissionDenied(fmt::format(
          "{} {} is a symlink; air does not write through one (remove it)", what, path));
    }
    return ErrnoStatus("open " + what + " " + path, errno);
  }
  Status own = CheckOwnRegularFile(fd, path, what);
  const int status_flags = ::fcntl(fd, F_GETFL);
  if (own.ok() && (status_flags < 0 || ::fcntl(fd, F_SETFL, status_flags & ~O_NONBLOCK) != 0)) {
    own = ErrnoStatus("open " + what + " " + path, errno);
  }
  if (!own.ok()) {
    ::close(fd);
    return own;
  }
  return fd;
}

Status WriteFully(int fd, std::string_view data, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + what, errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

std::vector<std::string> MergedEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::map<std::string, std::string> wanted;  // name -> its entry (a later override wins)
  for (const auto& [name, value] : overrides) wanted[name] = name + "=" + value;
  std::set<std::string> placed;
  std::vector<std::string> entries;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    auto it = wanted.find(entry.substr(0, entry.find('=')));
    if (it == wanted.end()) {
      entries.push_back(std::move(entry));
    } else if (placed.insert(it->first).second) {  // the first copy, replaced in place
      entries.push_back(it->second);
    }  // further copies are dropped: getenv takes the first, others (Python) the last
  }
  for (const auto& [name, value] : overrides) {
    if (placed.insert(name).second) entries.push_back(wanted[name]);
  }
  return entries;
}

std::vector<char*> EnvironmentPointers(std::vector<std::string>& entries) {
  std::vector<char*> pointers;
  pointers.reserve(entries.size() + 1);
  for (auto& e : entries) pointers.push_back(e.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace air
