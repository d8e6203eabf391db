// Helpers shared by the runtime unit tests: temporary directories and scanning /proc for
// processes that carry a marker in their environment (to prove nothing was left behind).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/env.h"

namespace air::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/air_runtime_test_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    // Snapshots are read-only files in writable directories: removal works without chmod.
    (void)DefaultEnv()->RemoveAll(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Pids of live processes whose environment contains `needle` (e.g. "MARKER=abc").
inline std::vector<pid_t> ProcessesWithEnv(const std::string& needle) {
  std::vector<pid_t> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (struct dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    std::string path = std::string("/proc/") + e->d_name + "/environ";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string data;
    char buf[8192];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) data.append(buf, static_cast<size_t>(n));
    ::close(fd);
    size_t pos = 0;
    while (pos < data.size()) {
      size_t zero = data.find('\0', pos);
      if (zero == std::string::npos) zero = data.size();
      if (data.compare(pos, zero - pos, needle) == 0) {
        // Zombies keep their environ readable only briefly; count only live ones.
        std::string stat_path = std::string("/proc/") + e->d_name + "/stat";
        auto stat = DefaultEnv()->ReadFile(stat_path);
        if (stat.ok()) {
          size_t close = stat->rfind(')');
          if (close != std::string::npos && close + 2 < stat->size() && (*stat)[close + 2] != 'Z') {
            out.push_back(static_cast<pid_t>(pid));
          }
        }
        break;
      }
      pos = zero + 1;
    }
  }
  ::closedir(dir);
  return out;
}

}  // namespace air::testing
