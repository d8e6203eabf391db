// Tests for the secret name and value rules.
#include "secrets/names.h"

#include <gtest/gtest.h>

namespace air::secrets {
namespace {

TEST(SecretNamesTest, AcceptsLettersDigitsDashUnderscoreDot) {
  EXPECT_TRUE(ValidateName("scope", "my_scope").ok());
  EXPECT_TRUE(ValidateName("key", "HF-token.v2_0").ok());
  EXPECT_TRUE(ValidateName("key", "a").ok());
  EXPECT_TRUE(ValidateName("key", std::string(kMaxNameLength, 'k')).ok());
}

TEST(SecretNamesTest, RejectsEmptyTooLongAndBadCharactersWithTheRule) {
  Status empty = ValidateName("scope", "");
  EXPECT_EQ(empty.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(empty.message().find("invalid scope name: it is empty"), std::string::npos);
  EXPECT_NE(empty.message().find("letters, digits, '-', '_' and '.'"), std::string::npos);

  Status long_name = ValidateName("key", std::string(kMaxNameLength + 1, 'k'));
  EXPECT_EQ(long_name.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(long_name.message().find("129 characters long"), std::string::npos);
  EXPECT_NE(long_name.message().find("1 to 128 characters"), std::string::npos);

  Status slash = ValidateName("key", "hf/token");
  EXPECT_NE(slash.message().find("invalid key name 'hf/token': '/' at position 3"),
            std::string::npos)
      << slash.message();
  Status space = ValidateName("scope", "my scope");
  EXPECT_NE(space.message().find("' ' (space) at position 3"), std::string::npos)
      << space.message();
  Status control = ValidateName("scope", std::string("a\nb"));
  EXPECT_NE(control.message().find("byte 0x0a at position 2"), std::string::npos)
      << control.message();
  // A name with a control byte is not echoed verbatim.
  EXPECT_EQ(control.message().find("a\nb"), std::string::npos);
  Status utf8 = ValidateName("scope", "caf\xc3\xa9");
  EXPECT_NE(utf8.message().find("byte 0xc3 at position 4"), std::string::npos) << utf8.message();
}

TEST(SecretNamesTest, ValueSizeBoundsAndNul) {
  EXPECT_TRUE(ValidateValue("s", "k", "x").ok());
  EXPECT_TRUE(ValidateValue("s", "k", std::string(kMaxValueBytes, 'v')).ok());
  Status big = ValidateValue("s", "k", std::string(kMaxValueBytes + 1, 'v'));
  EXPECT_EQ(big.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(big.message().find("s/k is 131073 bytes; at most 131072 bytes (128.0 KiB)"),
            std::string::npos)
      << big.message();
  Status empty = ValidateValue("s", "k", "");
  EXPECT_NE(empty.message().find("the value for s/k is empty"), std::string::npos);
  Status nul = ValidateValue("s", "k", std::string("ab\0cd", 5));
  EXPECT_NE(nul.message().find("NUL byte at offset 2"), std::string::npos) << nul.message();
  // Every other byte, newlines and invalid UTF-8 included, is a valid value.
  std::string all;
  for (int b = 1; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_TRUE(ValidateValue("s", "k", all).ok());
}

}  // namespace
}  // namespace air::secrets
