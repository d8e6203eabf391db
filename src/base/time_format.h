// UTC timestamps in ISO 8601 / RFC 3339 form, the one format air prints and stores:
// "2026-11-30T03:04:40Z", "...40.098Z" (milliseconds) or "...40.098061Z" (microseconds).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace air {

// `fraction_digits` is 0, 3 or 6 (seconds, milliseconds, microseconds).
std::string FormatUtcTimestamp(int64_t micros_since_epoch, int fraction_digits);

}  // namespace air
