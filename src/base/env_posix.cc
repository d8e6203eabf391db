// PosixEnv: the real Env over POSIX calls.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "base/env.h"
#include "base/posix_io.h"

namespace air {
namespace {

std::string DirName(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open directory " + dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus("fsync directory " + dir, err);
  return Status::Ok();
}

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

class PosixEnv final : public Env {
 public:
  Result<std::string> ReadFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open " + path, errno);
    std::string out;
    char buf[1 << 16];
    while (true) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(fd);
        return ErrnoStatus("read " + path, err);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

  Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode) override {
    // mkostemp creates a fresh, exclusive (O_EXCL) temporary file with mode 0600, so
    // concurrent writers never share one and a planted symlink is never followed.
    std::string tmp = path + ".tmp.XXXXXX";
    int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("create temporary file for " + path, errno);
    // open() honours the umask; make the mode exact (0600 must stay 0600, 0644 stay 0644).
    if (::fchmod(fd, mode) != 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return ErrnoStatus("chmod " + tmp, err);
    }
    Status st = WriteFully(fd, data, tmp);
    if (st.ok() && ::fsync(fd) != 0) st = ErrnoStatus("fsync " + tmp, errno);
    ::close(fd);
    if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
      st = ErrnoStatus("rename " + tmp + " to " + path, errno);
    }
    if (!st.ok()) {
      ::unlink(tmp.c_str());
      return st;
    }
    return FsyncDir(DirName(path));
  }

  Status AppendToFile(const std::string& path, std::string_view data) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus("open " + path, errno);
    Status st = WriteFully(fd, data, path);
    ::close(fd);
    return st;
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
