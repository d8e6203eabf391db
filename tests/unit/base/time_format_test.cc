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

TEST(ParseUtcTimestampTest, ReadsWhatFormatWrites) {
  const int64_t t = 1'796'000'680'098'061;
  EXPECT_EQ(ParseUtcTimestamp(FormatUtcTimestamp(t, 6)), t);
  EXPECT_EQ(ParseUtcTimestamp(FormatUtcTimestamp(t, 3)), t - 61);
  EXPECT_EQ(ParseUtcTimestamp(FormatUtcTimestamp(t, 0)), t - 98'061);
  for (const char* bad : {"", "2026-11-30", "2026-11-30T01:04:40", "2026-11-30T01:04:40.0980Z",
                          "2026-11-30T01:04:40.098061", "2026-11-30 01:04:40Z",
                          "2026-11-30T01:04:40.098061Zx", "2026-1a-30T01:04:40Z"}) {
    EXPECT_FALSE(ParseUtcTimestamp(bad)) << bad;
  }
}

}  // namespace
}  // namespace air
