// .gitignore semantics: wildmatch, anchoring, directory-only patterns, negation, nesting.
#include "spec/gitignore.h"

#include <gtest/gtest.h>

#include <string>

namespace air::spec {
namespace {

TEST(GitWildmatch, StarAndQuestionStayInsideOneSegment) {
  EXPECT_TRUE(GitWildmatch("*.log", "a.log"));
  EXPECT_FALSE(GitWildmatch("*.log", "a.logx"));
  EXPECT_FALSE(GitWildmatch("*.log", "dir/a.log"));
  EXPECT_TRUE(GitWildmatch("a?c", "abc"));
  EXPECT_FALSE(GitWildmatch("a?c", "a/c"));
  EXPECT_TRUE(GitWildmatch("foo**", "foobar"));
  EXPECT_FALSE(GitWildmatch("foo**", "foo/bar"));
}

TEST(GitWildmatch, DoubleStarSpansDirectories) {
  EXPECT_TRUE(GitWildmatch("**/foo", "foo"));
  EXPECT_TRUE(GitWildmatch("**/foo", "a/b/foo"));
  EXPECT_TRUE(GitWildmatch("a/**/b", "a/b"));
  EXPECT_TRUE(GitWildmatch("a/**/b", "a/x/y/b"));
  EXPECT_FALSE(GitWildmatch("a/**/b", "a/x/c"));
  EXPECT_TRUE(GitWildmatch("logs/**", "logs/x/y.txt"));
  EXPECT_FALSE(GitWildmatch("logs/**", "logs"));
}

TEST(GitWildmatch, BracketsAndEscapes) {
  EXPECT_TRUE(GitWildmatch("[abc].txt", "b.txt"));
  EXPECT_FALSE(GitWildmatch("[abc].txt", "d.txt"));
  EXPECT_TRUE(GitWildmatch("[!abc].txt", "d.txt"));
  EXPECT_TRUE(GitWildmatch("[a-c]x", "bx"));
  EXPECT_FALSE(GitWildmatch("[a-c]x", "dx"));
  EXPECT_TRUE(GitWildmatch("\\*star", "*star"));
  EXPECT_FALSE(GitWildmatch("\\*star", "xstar"));
}

TEST(GitWildmatch, ManyStarsDoNotBacktrackExponentially) {
  // Took minutes (a dry run of a directory holding such a name hung) before failures that no
  // retry can fix were propagated, as git's own wildmatch does.
  std::string name(100, 'a');
  EXPECT_FALSE(GitWildmatch("*a*a*a*a*a*a*a*a*b", name));
  EXPECT_TRUE(GitWildmatch("*a*a*a*a*a*a*a*a*a", name));
  EXPECT_FALSE(GitWildmatch("**/*a*a*a*a*a*a*a*a*b", "x/y/" + name));
  EXPECT_TRUE(GitWildmatch("**/*a*a*a*a*a*a*a*a", "x/y/" + name));
  EXPECT_FALSE(GitWildmatch("*a*a*a*a*/b", name + "/" + name));
  EXPECT_TRUE(GitWildmatch("*a*a*a*a*/a*", name + "/" + name));
  // Retries that an enclosing "**" still needs after an inner '*' hit a '/'.
  EXPECT_TRUE(GitWildmatch("a/**/x*y", "a/b/xc/d/xzy"));
  EXPECT_FALSE(GitWildmatch("a/**/x*y", "a/b/xc/d/xzz"));
}

TEST(GitignoreRules, UnanchoredPatternsMatchNamesAtAnyDepth) {
  GitignoreRules rules;
  rules.AddFile("", "*.log\n__pycache__/\n");
  EXPECT_TRUE(rules.IsIgnored("a.log", false));
  EXPECT_TRUE(rules.IsIgnored("deep/dir/b.log", false));
  EXPECT_TRUE(rules.IsIgnored("pkg/__pycache__", true));
  EXPECT_FALSE(rules.IsIgnored("pkg/__pycache__", false));  // directory-only pattern
  EXPECT_FALSE(rules.IsIgnored("a.txt", false));
}

TEST(GitignoreRules, SlashesAnchorToTheGitignoreDirectory) {
  GitignoreRules rules;
  rules.AddFile("", "/build\ndoc/*.txt\n");
  EXPECT_TRUE(rules.IsIgnored("build", true));
  EXPECT_FALSE(rules.IsIgnored("src/build", true));
  EXPECT_TRUE(rules.IsIgnored("doc/a.txt", false));
  EXPECT_FALSE(rules.IsIgnored("doc/sub/a.txt", false));
  EXPECT_FALSE(rules.IsIgnored("x/doc/a.txt", false));
}

TEST(GitignoreRules, LaterNegationReincludes) {
  GitignoreRules rules;
  rules.AddFile("", "*.log\n!keep.log\n");
  EXPECT_TRUE(rules.IsIgnored("a.log", false));
  EXPECT_FALSE(rules.IsIgnored("keep.log", false));
  EXPECT_FALSE(rules.IsIgnored("sub/keep.log", false));
}

TEST(GitignoreRules, NestedFilesApplyBelowTheirDirectoryAndWin) {
  GitignoreRules rules;
  rules.AddFile("", "*.tmp\n");
  rules.AddFile("sub", "!important.tmp\n/local.txt\n");
  EXPECT_TRUE(rules.IsIgnored("x.tmp", false));
  EXPECT_TRUE(rules.IsIgnored("sub/x.tmp", false));
  EXPECT_FALSE(rules.IsIgnored("sub/important.tmp", false));
  EXPECT_TRUE(rules.IsIgnored("important.tmp", false));  // the negation is only below sub/
  EXPECT_TRUE(rules.IsIgnored("sub/local.txt", false));
  EXPECT_FALSE(rules.IsIgnored("local.txt", false));
  EXPECT_FALSE(rules.IsIgnored("sub/deeper/local.txt", false));
}

TEST(GitignoreRules, CommentsBlankLinesEscapesAndTrailingSpaces) {
  GitignoreRules rules;
  rules.AddFile("", "# a comment\n\n\\#hash\n\\!bang\ntrailing   \r\n");
  EXPECT_EQ(rules.size(), 3u);
  EXPECT_TRUE(rules.IsIgnored("#hash", false));
  EXPECT_TRUE(rules.IsIgnored("!bang", false));
  EXPECT_TRUE(rules.IsIgnored("trailing", false));
  EXPECT_FALSE(rules.IsIgnored("# a comment", false));
}

}  // namespace
}  // namespace air::spec
