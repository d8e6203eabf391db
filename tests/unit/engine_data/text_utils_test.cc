// Tests for the tokenizer's building blocks: the GPT-2 byte alphabet, lossy UTF-8 decoding, the
// Oniguruma-compatible white space rewrite of regexes, and the pre-tokenizer splits.
#include <gtest/gtest.h>

#include <set>

#include "engine/data/pre_tokenizer.h"
#include "engine/data/regex.h"
#include "engine/data/utf8.h"
#include "unit/engine_data/test_tokenizers.h"

namespace air::engine {
namespace {

TEST(ByteLevelTest, AlphabetIsABijectionOfPrintableCodePoints) {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    std::string text(ByteToUnicode(static_cast<uint8_t>(b)));
    seen.insert(text);
    size_t len = 0;
    char32_t cp = DecodeUtf8At(text, 0, &len);
    EXPECT_EQ(len, text.size());
    EXPECT_EQ(UnicodeToByte(cp), b);
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    if (printable) {
      EXPECT_EQ(cp, static_cast<char32_t>(b));
    }
    std::string bytes;
    ASSERT_TRUE(ByteLevelToBytes(text, &bytes));
    EXPECT_EQ(bytes, std::string(1, static_cast<char>(b)));
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(ByteToUnicode(' '), "\xC4\xA0");   // 'Ġ' U+0120
  EXPECT_EQ(ByteToUnicode('\n'), "\xC4\x8A");  // 'Ċ' U+010A
  std::string out = "keep";
  EXPECT_FALSE(ByteLevelToBytes("a b", &out));  // a plain space is not in the alphabet
  EXPECT_EQ(out, "keep");
}

TEST(Utf8Test, LossyReplacesEachMaximalInvalidSubpart) {
  EXPECT_EQ(Utf8Lossy("plain"), "plain");
  EXPECT_EQ(Utf8Lossy("a\xC3\xC3"
                      "b"),
            "a\uFFFD\uFFFD"
            "b");
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98"), "\uFFFD");              // truncated 4-byte: one U+FFFD
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98\x80"), "\U0001F600");      // complete
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");  // surrogate: ED then 2 strays
  EXPECT_EQ(Utf8Lossy("\xC0\xAF"), "\uFFFD\uFFFD");            // overlong
  EXPECT_EQ(Utf8Lossy("\xE0\xA0"), "\uFFFD");
  EXPECT_EQ(Utf8Lossy("\xFF"), "\uFFFD");
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82\xAC", 0), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82", 0), 0u);
  EXPECT_EQ(CountCodePoints("a\xC3\xA9\xE2\x82\xAC"), 3u);
}

std::vector<std::string> Matches(const Regex& re, std::string_view text) {
  auto found = re.FindAll(text);
  EXPECT_TRUE(found.ok());
  std::vector<std::string> out;
  for (auto [b, e] : *found) out.emplace_back(text.substr(b, e - b));
  return out;
}

TEST(RegexTest, WhiteSpaceMeansUnicodeWhiteSpaceAsInOniguruma) {
  auto re = Regex::Compile(R"(\s+)", "test");
  ASSERT_TRUE(re.ok());
  // NBSP, U+0085 and U+3000 are white space; U+180E (Mongolian vowel separator) is not.
  EXPECT_EQ(Matches(*re,
                    "a\xC2\xA0"
                    "b\xC2\x85"
                    "c\xE3\x80\x80"
                    "d\xE1\xA0\x8E"
                    "e"),
            (std::vector<std::string>{"\xC2\xA0", "\xC2\x85", "\xE3\x80\x80"}));
  auto neg = Regex::Compile(R"([^\s\p{L}]+)", "test");
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ(Matches(*neg, "a \xE1\xA0\x8E!"), (std::vector<std::string>{"\xE1\xA0\x8E!"}));
  auto rewritten = RewriteWhitespaceClasses(R"(\S[\s\]]\\s\Q\s\E)");
  ASSERT_TRUE(rewritten.ok());
  EXPECT_EQ(rewritten->find("\\S"), std::string::npos);
  EXPECT_NE(rewritten->find("\\\\s"), std::string::npos);      // an escaped backslash stays
  EXPECT_NE(rewritten->find("\\Q\\s\\E"), std::string::npos);  // quoted text stays
  EXPECT_FALSE(RewriteWhitespaceClasses(R"([\S])").ok());
  auto bad = Regex::Compile("(", "tokenizer.json: pre_tokenizer.pattern");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tokenizer.json: pre_tokenizer.pattern: invalid regex"),
            std::string::npos);
}

TEST(RegexTest, LongSubjectsDoNotExhaustTheJitStack) {
  auto re = Regex::Compile(R"(\s+(?!\S)|\s+|[^\s]+)", "test");
  ASSERT_TRUE(re.ok());
  std::string text(1 << 20, ' ');
  text += "x";
  auto found = re->FindAll(text);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_GE(found->size(), 2u);
}

std::vector<std::string> Pieces(const PreTokenizer& pre, std::string_view text) {
  auto pieces = pre.Split(text);
  EXPECT_TRUE(pieces.ok());
  std::vector<std::string> out;
  for (const auto& p : *pieces) {
    out.push_back((p.prefix_space ? "^" : "") + std::string(text.substr(p.begin, p.end - p.begin)));
  }
  return out;
}

TEST(PreTokenizerTest, Llama3PatternSplitsLikeTheReference) {
  nlohmann::json spec = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern", {{"Regex", std::string(testing::kLlama3Pattern)}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  auto pre = PreTokenizer::FromJson(spec, "test");
  ASSERT_TRUE(pre.ok()) << pre.status().ToString();
  EXPECT_EQ(Pieces(*pre, "I'LL pay 12345 now!\n\n  ok"),
            (std::vector<std::string>{"I", "'LL", " pay", " ", "123", "45", " now", "!\n\n", " ",
                                      " ok"}));
}

TEST(PreTokenizerTest, Gpt2ByteLevelWithPrefixSpace) {
  auto pre = PreTokenizer::FromJson(
      {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}, "test");
  ASSERT_TRUE(pre.ok());
  EXPECT_EQ(Pieces(*pre, "Hello world"), (std::vector<std::string>{"^Hello", " world"}));
  EXPECT_EQ(Pieces(*pre, " Hi"), (std::vector<std::string>{" Hi"}));
  auto removed = PreTokenizer::FromJson(nlohmann::json::parse(R"({"type": "Sequence",
      "pretokenizers": [{"type": "Split", "pattern": {"String": "."}, "behavior": "Removed"},
      {"type": "ByteLevel", "use_regex": false}]})"),
                                        "test");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(Pieces(*removed, "a.b..c"), (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
}  // namespace air::engine
