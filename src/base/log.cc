// Implementation of the stderr logger.
#include "base/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>

namespace air::log {

Level Threshold() {
  static const Level level = [] {
    const char* v = std::getenv("AIR_LOG_LEVEL");
    if (v == nullptr) return Level::kWarn;
    if (std::strcmp(v, "debug") == 0) return Level::kDebug;
    if (std::strcmp(v, "info") == 0) return Level::kInfo;
    if (std::strcmp(v, "error") == 0) return Level::kError;
    return Level::kWarn;
  }();
  return level;
}

void Write(Level level, const char* file, int line, std::string_view message) {
  static const char kLetters[] = {'D', 'I', 'W', 'E'};
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm utc;
  gmtime_r(&tv.tv_sec, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &utc);
  const char* base = std::strrchr(file, '/');
  std::string out =
      fmt::format("{}.{:03d}Z {} {}:{}] {}\n", stamp, tv.tv_usec / 1000,
                  kLetters[static_cast<int>(level)], base ? base + 1 : file, line, message);
  ssize_t ignored = ::write(STDERR_FILENO, out.data(), out.size());
  (void)ignored;
}

}  // namespace air::log
