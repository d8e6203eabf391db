// Tests for base/time_format: the one UTC timestamp format air prints and stores.
#include "base/time_format.h"

#include <gtest/gtest.h>

namespace air {
namespace {

TEST(FormatUtcTimestampTest, SecondsMillisecondsMicroseconds) {
  const int64_t t = 1'796'000'680'098'061;  // a fixed instant
  EXPECT_EQ(FormatUtcTimestamp(t, 0), "2026-11-30T01:04:40Z");
  EXPECT_EQ(FormatUtcTimestamp(t, 3), "2026-11-30T01:04:40.098Z");
  EXPECT_EQ(FormatUtcTimestamp(t, 6), "2026-11-30T01:04:40.098061Z");
}

TEST(FormatUtcTimestampTest, EpochAndBeforeIt) {
  EXPECT_EQ(FormatUtcTimestamp(0, 6), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(FormatUtcTimestamp(-1, 6), "1969-12-31T23:59:59.999999Z");
}

}  // namespace
}  // namespace air
