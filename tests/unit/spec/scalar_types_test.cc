// YAML 1.2 core-schema typing of scalars and the strict decimal integer reader.
#include "spec/scalar_types.h"

#include <gtest/gtest.h>

namespace air::spec {
namespace {

YamlNode Scalar(std::string value, ScalarStyle style = ScalarStyle::kPlain) {
  YamlNode node;
  node.value = std::move(value);
  node.style = style;
  return node;
}

TEST(ScalarTypes, FollowsTheYaml12CoreSchema) {
  struct Case {
    const char* text;
    ScalarType type;
  } cases[] = {
      {"", ScalarType::kNull},
      {"~", ScalarType::kNull},
      {"null", ScalarType::kNull},
      {"true", ScalarType::kBool},
      {"False", ScalarType::kBool},
      {"on", ScalarType::kString},
      {"yes", ScalarType::kString},
      {"no", ScalarType::kString},
      {"off", ScalarType::kString},
      {"16", ScalarType::kInt},
      {"-3", ScalarType::kInt},
      {"010", ScalarType::kInt},
      {"0x1F", ScalarType::kInt},
      {"0o17", ScalarType::kInt},
      {"1_000", ScalarType::kString},
      {"1e3", ScalarType::kFloat},
      {"0.00002", ScalarType::kFloat},
      {"2e-5", ScalarType::kFloat},
      {".5", ScalarType::kFloat},
      {"-.inf", ScalarType::kFloat},
      {".nan", ScalarType::kFloat},
      {"1.2.3", ScalarType::kString},
      {"GPU_8xH100", ScalarType::kString},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ResolveScalarType(Scalar(c.text)), c.type) << "'" << c.text << "'";
  }
  EXPECT_EQ(ResolveScalarType(Scalar("4", ScalarStyle::kSingleQuoted)), ScalarType::kString);
  EXPECT_EQ(ResolveScalarType(Scalar("true", ScalarStyle::kDoubleQuoted)), ScalarType::kString);
}

TEST(ScalarTypes, ReadsPlainDecimalIntegers) {
  int64_t v = 0;
  std::string error;
  EXPECT_TRUE(ReadDecimalInteger(Scalar("16"), &v, &error));
  EXPECT_EQ(v, 16);
  EXPECT_TRUE(ReadDecimalInteger(Scalar("-3"), &v, &error));
  EXPECT_EQ(v, -3);
  EXPECT_TRUE(ReadDecimalInteger(Scalar("+5"), &v, &error));
  EXPECT_EQ(v, 5);
  EXPECT_TRUE(ReadDecimalInteger(Scalar("0"), &v, &error));
  EXPECT_EQ(v, 0);
}

TEST(ScalarTypes, RejectsAmbiguousOrMistypedIntegersWithTheFix) {
  struct Case {
    YamlNode node;
    const char* message;
  } cases[] = {
      {Scalar("010"),
       "'010' has a leading zero, which YAML 1.1 reads as octal and YAML 1.2 as "
       "decimal; write 10"},
      {Scalar("0x1F"), "'0x1F' is not a decimal integer; write 31"},
      {Scalar("0o17"), "'0o17' is not a decimal integer; write 15"},
      {Scalar("1e3"), "expected an integer, got the float '1e3'; write 1000"},
      {Scalar("2.5"), "expected an integer, got the float '2.5'"},
      {Scalar("1_000"), "'1_000' uses '_' separators (YAML 1.1 only); write 1000"},
      {Scalar("true"), "expected an integer, got the boolean 'true'"},
      {Scalar("4", ScalarStyle::kSingleQuoted),
       "expected an integer, got the string '4' (remove the quotes)"},
      {Scalar("99999999999999999999"), "'99999999999999999999' is out of range for an integer"},
      {Scalar("ten"), "expected an integer, got 'ten'"},
      {Scalar(""), "expected an integer, got null (no value)"},
      // Not finite or far out of range: no "write N" suggestion (casting them is undefined).
      {Scalar(".inf"), "expected an integer, got the float '.inf'"},
      {Scalar("-.inf"), "expected an integer, got the float '-.inf'"},
      {Scalar(".nan"), "expected an integer, got the float '.nan'"},
      {Scalar("1e400"), "expected an integer, got the float '1e400'"},
      {Scalar("1e19"), "expected an integer, got the float '1e19'"},
  };
  for (const auto& c : cases) {
    int64_t v = 0;
    std::string error;
    EXPECT_FALSE(ReadDecimalInteger(c.node, &v, &error)) << c.node.value;
    EXPECT_EQ(error, c.message);
  }
  YamlNode list;
  list.kind = YamlKind::kSequence;
  int64_t v = 0;
  std::string error;
  EXPECT_FALSE(ReadDecimalInteger(list, &v, &error));
  EXPECT_EQ(error, "expected an integer, got a list");
}

}  // namespace
}  // namespace air::spec
