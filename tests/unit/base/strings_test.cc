// Tests for base/strings: did-you-mean, splitting, UTF-8 validation, sizes.
#include "base/strings.h"

#include <gtest/gtest.h>

namespace air {
namespace {

TEST(EditDistanceTest, CountsInsertionsDeletionsSubstitutions) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
}

TEST(ClosestMatchTest, SuggestsNearbyKeyOnly) {
  std::vector<std::string> keys = {"experiment_name", "compute", "command", "max_retries"};
  EXPECT_EQ(ClosestMatch("experment_name", keys), "experiment_name");
  EXPECT_EQ(ClosestMatch("comand", keys), "command");
  EXPECT_EQ(ClosestMatch("zzzzzz", keys), "");
  EXPECT_EQ(DidYouMeanSuffix("max_retry", keys), " (did you mean 'max_retries'?)");
}

TEST(SplitTest, KeepsEmptyFields) {
  EXPECT_EQ(Split("a/b", '/'), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Split("a//", '/'), (std::vector<std::string>{"a", "", ""}));
  EXPECT_EQ(Trim("  x y \n"), "x y");
}

TEST(Utf8Test, RejectsInvalidSequencesWithOffset) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("日本語 😀"));
  size_t at = 0;
  EXPECT_FALSE(IsValidUtf8(std::string("ab\xff"
                                       "cd"),
                           &at));
  EXPECT_EQ(at, 2u);
  EXPECT_FALSE(IsValidUtf8(std::string("\xc0\xaf")));      // overlong '/'
  EXPECT_FALSE(IsValidUtf8(std::string("\xed\xa0\x80")));  // surrogate
  EXPECT_FALSE(IsValidUtf8(std::string("\xe6\x97")));      // truncated
}

TEST(HumanBytesTest, PicksUnit) {
  EXPECT_EQ(HumanBytes(12), "12 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(3ull << 30), "3.0 GiB");
}

TEST(ParseByteSizeTest, DecimalAndBinaryUnits) {
  EXPECT_EQ(*ParseByteSize("1000000"), 1000000u);
  EXPECT_EQ(*ParseByteSize("40KB"), 40000u);
  EXPECT_EQ(*ParseByteSize("2GB"), 2000000000u);
  EXPECT_EQ(*ParseByteSize("64MiB"), 64u << 20);
  EXPECT_EQ(*ParseByteSize(" 5 GiB "), 5ull << 30);
  EXPECT_EQ(*ParseByteSize("1TiB"), 1ull << 40);
  for (const char* bad :
       {"", "GiB", "5 gigs", "-1", "1.5GB", "99999999999999999999TB", "18446744073709551616"}) {
    auto parsed = ParseByteSize(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("is not a size"), std::string::npos);
  }
}

}  // namespace
}  // namespace air
