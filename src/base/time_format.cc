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

}  // namespace air
