// Writing YAML back: every value and its type survive a round trip; source text is preferred.
#include "spec/yaml_emit.h"

#include <gtest/gtest.h>

namespace air::spec {
namespace {

YamlNode Parse(std::string_view text) {
  YamlNode node;
  std::string error;
  EXPECT_TRUE(ParseYamlValue(text, &node, &error)) << error;
  return node;
}

TEST(YamlEmit, RoundTripsValuesAndTypes) {
  for (std::string_view text : {
           "a: 1\nb: '4'\nc: 0.00002\nd: on\ne: \"yes\"\nf: ~\ng:\n",
           "list:\n  - 1\n  - {x: [1, 2], y: {}}\n  - []\n  - - nested\n    - seq\n",
           "text: |\n  line one\n  line two\n",
           "quote: \"she said \\\"hi\\\"\\tand left\\\\\"\nunicode: \"caf\u00e9 \u65e5\u672c\"\n",
           "'key with: colon': 1\n\"4\": four\n",
           "[1, two, {three: 3}]",
           "plain scalar",
       }) {
    YamlNode original = Parse(text);
    std::string emitted = EmitYaml(original);
    YamlNode reread = Parse(emitted);
    EXPECT_TRUE(SameYamlContent(original, reread)) << "input:\n"
                                                   << text << "\nemitted:\n"
                                                   << emitted;
  }
}

TEST(YamlEmit, WritesBlockStyleWithQuotedStrings) {
  EXPECT_EQ(EmitYaml(Parse("{a: 1, b: '4', c: [x, {d: e}]}")),
            "a: 1\nb: \"4\"\nc:\n  - x\n  -\n    d: e\n");
}

TEST(YamlEmit, RendersValuesOnOneLine) {
  EXPECT_EQ(RenderInline(Parse("'4'")), "'4'");
  EXPECT_EQ(RenderInline(Parse("abc")), "abc");
  EXPECT_EQ(RenderInline(Parse("{a: [1, 2]}")), "{a: [1, 2]}");
  EXPECT_EQ(RenderInline(Parse("|\n  one\n  two\n")), "<2 lines>");
  EXPECT_EQ(RenderInline(Parse(std::string(100, 'x')), 20), std::string(17, 'x') + "...");
}

TEST(YamlEmit, ParametersTextPrefersTheSourceAndFallsBackWhenItCannot) {
  std::string source = "params: &p\n  a: 1  # keep me\n  b: '2'\nother: *p\n";
  YamlNode root = Parse(source);
  EXPECT_EQ(ParametersText(source, *root.Find("params")), "a: 1  # keep me\nb: '2'\n");
  // The alias's text cannot stand alone, so the node is emitted instead.
  EXPECT_EQ(ParametersText(source, *root.Find("other")), "a: 1\nb: \"2\"\n");
}

}  // namespace
}  // namespace air::spec
