// Reading whole, tailed and growing log files.
#include "runtime/log_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "base/strings.h"

namespace air::runtime {

Result<std::vector<std::string>> ReadLogLines(Env* env, const std::string& path) {
  AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  std::vector<std::string> lines = Split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

std::vector<std::string> TailLines(std::vector<std::string> lines, int count) {
  if (count <= 0 || static_cast<size_t>(count) >= lines.size()) return lines;
  lines.erase(lines.begin(), lines.end() - count);
  return lines;
}

Result<std::vector<std::string>> LogFollower::ReadNew(bool final) {
  std::vector<std::string> lines;
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return lines;
    return ErrnoStatus("open " + path_, errno);
  }
  std::string data;
  char buf[65536];
  while (true) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(offset_));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus("read " + path_, err);
    }
    if (n == 0) break;
    offset_ += static_cast<uint64_t>(n);
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  partial_ += data;
  size_t start = 0;
  while (true) {
    size_t newline = partial_.find('\n', start);
    if (newline == std::string::npos) break;
    lines.push_back(partial_.substr(start, newline - start));
    start = newline + 1;
  }
  partial_.erase(0, start);
  if (final && !partial_.empty()) {
    lines.push_back(partial_);
    partial_.clear();
  }
  return lines;
}

}  // namespace air::runtime
