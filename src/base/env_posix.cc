// PosixEnv: the real Env over POSIX calls.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "base/env.h"
#include "base/posix_io.h"
#include "base/strings.h"

namespace air {
namespace {

// The kernel's ephemeral port range (net.ipv4.ip_local_port_range), Linux's default if unreadable.
std::pair<int, int> EphemeralPortRange() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768, high = 60999;
  if (!(in >> low >> high) || low <= 0 || high < low) return {32768, 60999};
  return {low, high};
}

// True when nothing holds `port` on any local address (a bind without SO_REUSEADDR succeeds).
bool PortIsFree(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return free;
}

// A port the kernel hands out for bind(0): free now, but from the ephemeral range.
Result<int> PickEphemeralPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("bind 127.0.0.1:0", err);
  }
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("getsockname", err);
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

// A file being written; errors name its path, a full disk says how much it was asked to take.
class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override { (void)Close(); }
  const std::string& path() const override { return path_; }

  Status Append(std::string_view data) override {
    if (fd_ < 0) return FailedPrecondition("write " + path_ + ": the file is closed");
    Status st = WriteFully(fd_, data, path_);
    if (st.code() == ErrorCode::kResourceExhausted) {
      return ResourceExhausted(
          fmt::format("{} ({} more were to be written)", st.message(), HumanBytes(data.size())));
    }
    if (st.ok()) appended_ = true;
    return st;
  }

  Status AppendFileContents(const std::string& source) override {
    if (fd_ < 0) return FailedPrecondition("write " + path_ + ": the file is closed");
    int in = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return ErrnoStatus("open " + source, errno);
    Status st = CopyInto(in, source);
    ::close(in);
    if (st.ok()) appended_ = true;
    return st;
  }

  Status Sync() override {
    if (fd_ < 0) return FailedPrecondition("fsync " + path_ + ": the file is closed");
    if (::fsync(fd_) != 0) return ErrnoStatus("fsync " + path_, errno);
    return Status::Ok();
  }

  Status Close() override {
    if (fd_ < 0) return Status::Ok();
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0 && errno != EINTR) return ErrnoStatus("close " + path_, errno);
    return Status::Ok();
  }

 private:
  // A copy-on-write clone into a still empty file, else copy_file_range, else read and write.
  Status CopyInto(int in, const std::string& source) {
    if (!appended_ && ::ioctl(fd_, FICLONE, in) == 0) return Status::Ok();
    while (true) {
      ssize_t n = ::copy_file_range(in, nullptr, fd_, nullptr, size_t{1} << 30, 0);
      if (n == 0) return Status::Ok();
      if (n > 0) continue;
      if (errno == EINTR) continue;
      if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP) {
        return ErrnoStatus("copy " + source + " to " + path_, errno);
      }
      break;  // not supported here: copy by hand from where the kernel stopped
    }
    char buf[1 << 16];
    while (true) {
      ssize_t n = ::read(in, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus("read " + source, errno);
      if (n == 0) return Status::Ok();
      AIR_RETURN_IF_ERROR(WriteFully(fd_, std::string_view(buf, static_cast<size_t>(n)), path_));
    }
  }

  std::string path_;
  int fd_;
  bool appended_ = false;
};

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixSequentialFile() override { ::close(fd_); }
  const std::string& path() const override { return path_; }
  Result<size_t> Read(char* buffer, size_t size) override {
    while (true) {
      ssize_t n = ::read(fd_, buffer, size);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) return ErrnoStatus("read " + path_, errno);
    }
  }

 private:
  std::string path_;
  int fd_;
};

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open " + path, errno);
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(path, fd));
  }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, WriteMode how,
                                                        mode_t mode) override {
    // Never through a symlink; an existing file must be this user's (base/posix_io.h).
    if (how != WriteMode::kCreateNew) {
      AIR_ASSIGN_OR_RETURN(
          int fd,
          OpenOwnFileForWrite(path, O_CREAT | (how == WriteMode::kTruncate ? O_TRUNC : O_APPEND),
                              mode, "file"));
      return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
    }
    // A new file is created 0600 and then given its exact mode (open() honours the umask).
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return ErrnoStatus("create " + path, errno);
    if (::fchmod(fd, mode) != 0) {
      int err = errno;
      ::close(fd);
      ::unlink(path.c_str());
      return ErrnoStatus("chmod " + path, err);
    }
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoStatus("rename " + from + " to " + to, errno);
    }
    return Status::Ok();
  }

  Status RenameFileNoReplace(const std::string& from, const std::string& to) override {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST) return AlreadyExists("'" + to + "' already exists");
      return ErrnoStatus("rename " + from + " to " + to, errno);
    }
    return Status::Ok();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus("remove " + path, errno);
    }
    return Status::Ok();
  }

  Status SyncDir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open directory " + dir, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return ErrnoStatus("fsync directory " + dir, err);
    return Status::Ok();
  }

  Result<FileLock> LockFile(const std::string& path, FileLock::Mode mode,
                            const std::function<bool()>& should_stop) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return ErrnoStatus("open lock file " + path, errno);
    FileLock lock(fd);  // closes the descriptor on every return below
    const int op = mode == FileLock::Mode::kShared ? LOCK_SH : LOCK_EX;
    if (!should_stop) {
      while (::flock(fd, op) != 0) {
        if (errno != EINTR) return ErrnoStatus("lock " + path, errno);
      }
      return lock;
    }
    while (::flock(fd, op | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) return ErrnoStatus("lock " + path, errno);
      if (should_stop()) {
        return Cancelled("stopped waiting for the lock " + path + ": the run is being canceled");
      }
      SleepMicros(100'000);
    }
    return lock;
  }

  bool FileExists(const std::string& path) override {
    struct stat sb;
    return ::stat(path.c_str(), &sb) == 0;
  }

  bool IsDirectory(const std::string& path) override {
    struct stat sb;
    return ::stat(path.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
  }

  Status CreateDirs(const std::string& path, mode_t mode) override {
    if (path.empty()) return InvalidArgument("CreateDirs: empty path");
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = path.find('/', pos + 1);
      cur = path.substr(0, pos);
      if (cur.empty()) continue;
      if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) {
        return ErrnoStatus("mkdir " + cur, errno);
      }
    }
    if (!IsDirectory(path)) return FailedPrecondition(path + " exists and is not a directory");
    return Status::Ok();
  }

  Result<PathInfo> GetPathInfo(const std::string& path, bool follow_symlinks) override {
    struct stat sb;
    const int rc = follow_symlinks ? ::stat(path.c_str(), &sb) : ::lstat(path.c_str(), &sb);
    if (rc != 0) return ErrnoStatus("stat " + path, errno);
    PathInfo info;
    info.type = S_ISDIR(sb.st_mode)   ? PathInfo::Type::kDirectory
                : S_ISREG(sb.st_mode) ? PathInfo::Type::kFile
                : S_ISLNK(sb.st_mode) ? PathInfo::Type::kSymlink
                                      : PathInfo::Type::kOther;
    info.owner = sb.st_uid;
    info.mode = sb.st_mode & 07777;
    return info;
  }

  Status ChangeMode(const std::string& path, mode_t mode) override {
    if (::chmod(path.c_str(), mode) != 0) return ErrnoStatus("chmod " + path, errno);
    return Status::Ok();
  }

  Status RemoveAll(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) return Status(ErrorCode::kInternal, "remove " + path + ": " + ec.message());
    return Status::Ok();
  }

  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return ErrnoStatus("opendir " + path, errno);
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(dir)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }

  Result<uint64_t> FileSize(const std::string& path) override {
    struct stat sb;
    if (::stat(path.c_str(), &sb) != 0) return ErrnoStatus("stat " + path, errno);
    return static_cast<uint64_t>(sb.st_size);
  }

  Result<int64_t> FileModifiedMicros(const std::string& path) override {
    struct stat sb;
    if (::stat(path.c_str(), &sb) != 0) return ErrnoStatus("stat " + path, errno);
    return static_cast<int64_t>(sb.st_mtim.tv_sec) * 1'000'000 + sb.st_mtim.tv_nsec / 1000;
  }

  int64_t NowMicros() override {
    using namespace std::chrono;
    return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  }

  int64_t MonotonicMicros() override {
    using namespace std::chrono;
    return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
  }

  void SleepMicros(int64_t micros) override {
    std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }

  std::optional<std::string> GetEnv(const std::string& name) override {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  }

  Result<int> PickFreePort() override {
    const int low = EphemeralPortRange().first;
    // Below the ephemeral range: a port there cannot be handed to another socket's bind(0) or
    // outgoing connect() between this check and the rendezvous store's bind (the race that a
    // bind-0 pick has, and that failed a CI run). Ranges too low to leave room fall back to it.
    constexpr int kSpan = 10000;
    if (low - kSpan >= 1024) {
      std::random_device seed;
      const int start = static_cast<int>(seed() % kSpan);
      for (int i = 0; i < 200; ++i) {
        const int port = low - kSpan + (start + i * 37) % kSpan;
        if (PortIsFree(port)) return port;
      }
    }
    return PickEphemeralPort();
  }
};

}  // namespace

Env* DefaultEnv() {
  static PosixEnv env;  // stateless: safe to share
  return &env;
}

}  // namespace air
