// Minimal leveled logging to stderr for diagnostics (not for user-facing output, which the CLI
// prints itself). The level comes from AIR_LOG_LEVEL (debug|info|warn|error; default warn) and
// is read once per Logger. Lines look like "2026-11-30T00:00:00.123Z W file.cc:42] message".
// Thread safety: each line is written with one write(2) call.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace air::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// The threshold from AIR_LOG_LEVEL; computed on first use (immutable afterwards).
Level Threshold();
void Write(Level level, const char* file, int line, std::string_view message);

}  // namespace air::log

#define AIR_LOG_AT_(lvl, ...)                                                 \
  do {                                                                        \
    if (static_cast<int>(lvl) >= static_cast<int>(::air::log::Threshold())) { \
      ::air::log::Write(lvl, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
    }                                                                         \
  } while (0)

#define AIR_DEBUG(...) AIR_LOG_AT_(::air::log::Level::kDebug, __VA_ARGS__)
#define AIR_INFO(...) AIR_LOG_AT_(::air::log::Level::kInfo, __VA_ARGS__)
#define AIR_WARN(...) AIR_LOG_AT_(::air::log::Level::kWarn, __VA_ARGS__)
#define AIR_ERROR(...) AIR_LOG_AT_(::air::log::Level::kError, __VA_ARGS__)
