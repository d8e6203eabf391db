// YamlNode parsing: positions, styles, duplicate keys kept, aliases, and YAML errors.
#include "spec/yaml_tree.h"

#include <gtest/gtest.h>

#include "spec/scalar_types.h"

namespace air::spec {
namespace {

YamlNode Parse(std::string_view text) {
  Diagnostics diags("t.yaml");
  YamlNode root;
  bool empty = true;
  EXPECT_TRUE(ParseYamlDocument(text, &diags, &root, &empty)) << text;
  return root;
}

SpecDiagnostic ParseError(std::string_view text) {
  Diagnostics diags("t.yaml");
  YamlNode root;
  bool empty = true;
  EXPECT_FALSE(ParseYamlDocument(text, &diags, &root, &empty)) << text;
  EXPECT_EQ(diags.size(), 1u);
  return diags.empty() ? SpecDiagnostic{} : diags.Sorted()[0];
}

TEST(YamlTree, KeepsPositionsStylesAndSpans) {
  std::string text = "name: demo\ncount: '4'\nlist:\n  - a\n  - {k: v}\n";
  YamlNode root = Parse(text);
  ASSERT_TRUE(root.IsMapping());
  ASSERT_EQ(root.entries.size(), 3u);
  const auto& [k0, v0] = root.entries[0];
  EXPECT_EQ(k0.value, "name");
  EXPECT_EQ(k0.location.line, 1);
  EXPECT_EQ(k0.location.column, 1);
  EXPECT_EQ(v0.location.column, 7);
  EXPECT_EQ(text.substr(v0.begin_offset, v0.end_offset - v0.begin_offset), "demo");
  const YamlNode& count = root.entries[1].second;
  EXPECT_EQ(count.style, ScalarStyle::kSingleQuoted);
  EXPECT_TRUE(count.IsQuotedOrTaggedString());
  EXPECT_EQ(count.location.line, 2);
  const YamlNode& list = root.entries[2].second;
  ASSERT_TRUE(list.IsSequence());
  ASSERT_EQ(list.items.size(), 2u);
  EXPECT_TRUE(list.items[1].IsMapping());
  EXPECT_TRUE(list.items[1].flow);
  EXPECT_EQ(list.items[1].location.line, 5);
  EXPECT_EQ(list.items[1].location.column, 5);
}

TEST(YamlTree, ColumnsCountCharactersNotBytes) {
  YamlNode root = Parse("名前: 値\nx: 1\n");
  ASSERT_EQ(root.entries.size(), 2u);
  EXPECT_EQ(root.entries[0].second.location.column, 5);  // after "名前: "
  EXPECT_EQ(root.entries[0].second.value, "値");
}

TEST(YamlTree, KeepsDuplicateKeysInOrder) {
  YamlNode root = Parse("a: 1\nb: 2\na: 3\n");
  ASSERT_EQ(root.entries.size(), 3u);
  EXPECT_EQ(root.entries[2].first.value, "a");
  EXPECT_EQ(root.entries[2].first.location.line, 3);
  EXPECT_EQ(root.Find("a")->value, "1");  // Find returns the first
}

TEST(YamlTree, ExpandsAliases) {
  YamlNode root = Parse("base: &b {x: 1}\nuse: *b\n");
  const YamlNode* use = root.Find("use");
  ASSERT_NE(use, nullptr);
  ASSERT_TRUE(use->IsMapping());
  EXPECT_EQ(use->Find("x")->value, "1");
  EXPECT_EQ(use->location.line, 2);
}

TEST(YamlTree, RejectsUndefinedAliasWithPosition) {
  SpecDiagnostic d = ParseError("a: 1\nb: *nope\n");
  EXPECT_EQ(d.line, 2);
  EXPECT_EQ(d.column, 4);
  EXPECT_NE(d.message.find("'*nope'"), std::string::npos) << d.message;
}

TEST(YamlTree, StopsExponentialAliasExpansion) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += (j ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  SpecDiagnostic d = ParseError(text);
  EXPECT_NE(d.message.find("more than"), std::string::npos) << d.message;
}

TEST(YamlTree, RejectsDeepNestingInsteadOfOverflowingTheStack) {
  // 100,000 levels crashed the recursive builder; 512 levels are accepted.
  std::string deep = "p: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  SpecDiagnostic d = ParseError(deep);
  EXPECT_EQ(d.line, 1);
  EXPECT_NE(d.message.find("nested more than 512 levels"), std::string::npos) << d.message;
  Parse("p: " + std::string(511, '[') + std::string(511, ']'));  // with the mapping: 512
  ParseError("p: " + std::string(512, '[') + std::string(512, ']'));
}

TEST(YamlTree, RejectsDeepNestingBuiltFromChainedAliases) {
  // Each anchor nests the previous one 300 levels deeper: few nodes, unbounded depth.
  std::string text = "a0: &a0 x\n";
  for (int i = 1; i < 6; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " " + std::string(300, '[') +
            "*a" + std::to_string(i - 1) + std::string(300, ']') + "\n";
  }
  SpecDiagnostic d = ParseError(text);
  EXPECT_EQ(d.line, 3) << d.message;
  EXPECT_NE(d.message.find("after expanding aliases"), std::string::npos) << d.message;
}

TEST(YamlTree, RejectsBillionLaughs) {
  // Nine levels of ten aliases each: 10^9 nodes once expanded, from a 1 KB file.
  std::string text = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 10; ++i) {
    std::string prev = "*l" + std::to_string(i - 1);
    text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += (j ? ", " : "") + prev;
    text += "]\n";
  }
  SpecDiagnostic d = ParseError(text);
  EXPECT_NE(d.message.find("more than 200000 nodes (after expanding aliases)"), std::string::npos)
      << d.message;
  EXPECT_GE(d.line, 5);
}

TEST(YamlTree, RejectsAliasesThatRepeatLongText) {
  // 40 nodes, but each alias repeats 1 MiB: 40 MiB of parameters written out for every run.
  std::string text = "big: &big " + std::string(1 << 20, 'x') + "\nparameters:\n";
  for (int i = 0; i < 40; ++i) text += "  k" + std::to_string(i) + ": *big\n";
  SpecDiagnostic d = ParseError(text);
  EXPECT_NE(d.message.find("more than 16 MiB of text (after expanding aliases"), std::string::npos)
      << d.message;
  EXPECT_GT(d.line, 2);
  // A few repeats of a short anchor are fine.
  Parse("a: &a hello\nb: [*a, *a, *a]\n");
}

TEST(YamlTree, SyntaxErrorsCarryLineAndColumn) {
  SpecDiagnostic d = ParseError("a: [1, 2\nb: 3\n");
  EXPECT_EQ(d.line, 2);
  EXPECT_NE(d.message.find("flow sequence that starts at line 1, column 4"), std::string::npos)
      << d.message;
  SpecDiagnostic tab = ParseError("a:\n\tb: 1\n");
  EXPECT_EQ(tab.line, 2);
  EXPECT_EQ(tab.column, 1);
  EXPECT_NE(tab.message.find("tabs are not allowed"), std::string::npos) << tab.message;
}

TEST(YamlTree, RejectsASecondDocument) {
  SpecDiagnostic d = ParseError("a: 1\n---\nb: 2\n");
  EXPECT_EQ(d.line, 2);
  EXPECT_NE(d.message.find("more than one YAML document"), std::string::npos);
}

TEST(YamlTree, EmptyAndCommentOnlyDocumentsAreEmpty) {
  for (std::string_view text : {"", "# only a comment\n", "\n\n"}) {
    Diagnostics diags("t.yaml");
    YamlNode root;
    bool empty = false;
    EXPECT_TRUE(ParseYamlDocument(text, &diags, &root, &empty));
    EXPECT_TRUE(empty) << text;
  }
}

TEST(YamlTree, SameContentDistinguishesQuotedFromPlain) {
  YamlNode a = Parse("x: 4\n");
  YamlNode b = Parse("x: '4'\n");
  YamlNode c = Parse("{x: 4}");
  EXPECT_FALSE(SameYamlContent(a, b));
  EXPECT_TRUE(SameYamlContent(a, c));
}

TEST(YamlTree, DescribesNodesForMessages) {
  YamlNode root = Parse("a: [1]\nb: {c: 1}\nd:\ne: '4'\nf: 5\n");
  EXPECT_EQ(DescribeNode(*root.Find("a")), "a list");
  EXPECT_EQ(DescribeNode(*root.Find("b")), "a mapping");
  EXPECT_EQ(DescribeNode(*root.Find("d")), "null (no value)");
  EXPECT_EQ(DescribeNode(*root.Find("e")), "the string '4'");
  EXPECT_EQ(DescribeNode(*root.Find("f")), "'5'");
}

}  // namespace
}  // namespace air::spec
