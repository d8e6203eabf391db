// UTC timestamp formatting.
#include "base/time_format.h"

#include <fmt/format.h>

#include <ctime>

namespace air {

std::string FormatUtcTimestamp(int64_t micros_since_epoch, int fraction_digits) {
  int64_t secs = micros_since_epoch / 1000000;
  int64_t micros = micros_since_epoch % 1000000;
  if (micros < 0) {  // before the epoch: floor, so the fraction stays positive
    micros += 1000000;
    secs -= 1;
  }
  time_t t = static_cast<time_t>(secs);
  tm utc;
  gmtime_r(&t, &utc);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &utc);
  switch (fraction_digits) {
    case 3:
      return fmt::format("{}.{:03d}Z", date, micros / 1000);
    case 6:
      return fmt::format("{}.{:06d}Z", date, micros);
    default:
      return fmt::format("{}Z", date);
  }
}

std::optional<int64_t> ParseUtcTimestamp(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.fff|.ffffff]Z
  auto digits = [&](size_t at, size_t n, int* out) {
    if (at + n > text.size()) return false;
    int v = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      v = v * 10 + (text[i] - '0');
    }
    *out = v;
    return true;
  };
  tm utc{};
  int year = 0, month = 0;
  if (text.size() < 20 || !digits(0, 4, &year) || text[4] != '-' || !digits(5, 2, &month) ||
      text[7] != '-' || !digits(8, 2, &utc.tm_mday) || text[10] != 'T' ||
      !digits(11, 2, &utc.tm_hour) || text[13] != ':' || !digits(14, 2, &utc.tm_min) ||
      text[16] != ':' || !digits(17, 2, &utc.tm_sec)) {
    return std::nullopt;
  }
  int micros = 0;
  size_t end = 19;
  if (text[19] == '.') {
    const size_t n = text.size() - 21;  // between the '.' and the 'Z'
    int fraction = 0;
    if ((n != 3 && n != 6) || !digits(20, n, &fraction)) return std::nullopt;
    micros = n == 3 ? fraction * 1000 : fraction;
    end = 20 + n;
  }
  if (end + 1 != text.size() || text[end] != 'Z') return std::nullopt;
  utc.tm_year = year - 1900;
  utc.tm_mon = month - 1;
  const time_t secs = timegm(&utc);
  return static_cast<int64_t>(secs) * 1000000 + micros;
}

}  // namespace air
