// UTC timestamps in ISO 8601 / RFC 3339 form, the one format air prints and stores:
// "2026-11-30T03:04:40Z", "...40.098Z" (milliseconds) or "...40.098061Z" (microseconds), written
// and read back; and
// the seconds elapsed on the steady clock, for the throughput figures printed beside them.
// Thread safety: pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace air {

// `fraction_digits` is 0, 3 or 6 (seconds, milliseconds, microseconds).
std::string FormatUtcTimestamp(int64_t micros_since_epoch, int fraction_digits);

// The microseconds since the epoch of a timestamp FormatUtcTimestamp writes (0, 3 or 6
// fraction digits); nullopt for anything else.
std::optional<int64_t> ParseUtcTimestamp(std::string_view text);

// Seconds from `start` to now on the steady clock.
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace air
