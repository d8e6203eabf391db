// Tokenizer unit tests on hand-made byte-level BPE vocabularies: merge order, ignore_merges,
// every byte 0..255, added and special tokens (longest first, lstrip/rstrip/single_word),
// post-processor BOS, offsets, NFC, tokenizer_config.json, and loading errors.
#include "engine/data/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/data/utf8.h"
#include "unit/engine_data/test_tokenizers.h"

namespace air::engine {
namespace {

using testing::Added;
using testing::TinyTokenizer;
using testing::TinyTokenizerJson;
using testing::TinyTokenizerSpec;
using Ids = std::vector<int32_t>;

Ids Encode(const Tokenizer& tok, std::string_view text, bool special = true) {
  auto ids = tok.Encode(text, special);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : Ids{};
}

TEST(TokenizerTest, MergesApplyLowestRankFirst) {
  TinyTokenizerSpec spec;
  spec.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}};
  auto tok = TinyTokenizer(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(Encode(*tok, "hello"), (Ids{259}));
  // " hello" is its own piece: the space (byte 32, 'Ġ') does not merge with it.
  EXPECT_EQ(Encode(*tok, "hello hello"), (Ids{259, 32, 259}));
  EXPECT_EQ(Encode(*tok, "help"), (Ids{256, 'l', 'p'}));
  EXPECT_EQ(tok->Decode(Ids{259, 32, 259}), "hello hello");
}

TEST(TokenizerTest, RankBeatsPositionAndLeftmostBreaksTies) {
  TinyTokenizerSpec spec;
  spec.merges = {{"b", "c"}, {"a", "b"}, {"a", "a"}};
  auto tok = TinyTokenizer(spec);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(Encode(*tok, "abc"), (Ids{'a', 256}));  // "bc" (rank 0) wins over "ab" (rank 1)
  EXPECT_EQ(Encode(*tok, "aaa"), (Ids{258, 'a'}));  // the leftmost "aa" merges first
  EXPECT_EQ(Encode(*tok, "aaaa"), (Ids{258, 258}));
}

TEST(TokenizerTest, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  TinyTokenizerSpec spec;
  spec.merges = {{"b", "c"}, {"a", "b"}, {"ab", "c"}};  // "abc" exists but BPE cannot reach it
  auto plain = TinyTokenizer(spec);
  spec.ignore_merges = true;
  auto direct = TinyTokenizer(spec);
  ASSERT_TRUE(plain.ok() && direct.ok());
  EXPECT_EQ(Encode(*plain, "abc"), (Ids{'a', 256}));
  EXPECT_EQ(Encode(*direct, "abc"), (Ids{258}));
}

TEST(TokenizerTest, MergesInStringFormAreTheSame) {
  TinyTokenizerSpec spec;
  spec.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}};
  spec.merges_as_strings = true;
  auto tok = TinyTokenizer(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(Encode(*tok, "hell"), (Ids{258}));
}

TEST(TokenizerTest, EveryByteEncodesAndDecodes) {
  auto tok = TinyTokenizer({});
  ASSERT_TRUE(tok.ok());
  for (int b = 0; b < 256; ++b) {
    // A lone byte decodes to itself when it is ASCII, else to U+FFFD (invalid UTF-8).
    std::string expected = b < 0x80 ? std::string(1, static_cast<char>(b)) : "\xEF\xBF\xBD";
    EXPECT_EQ(tok->Decode(Ids{b}), expected) << b;
  }
  // Every code point up to U+07FF (every lead and continuation byte of 2-byte sequences) is
  // encoded byte by byte, ids = byte values, and decodes back.
  for (char32_t cp = 1; cp < 0x800; ++cp) {
    std::string text;
    AppendUtf8(cp, &text);
    Ids ids = Encode(*tok, text);
    Ids bytes(text.begin(), text.end());
    for (auto& id : bytes) id = static_cast<uint8_t>(id);
    EXPECT_EQ(ids, bytes) << static_cast<uint32_t>(cp);
    EXPECT_EQ(tok->Decode(ids), text);
  }
  std::string all;
  for (char32_t cp : {U'\0', U'\x7f', U'\u00ff', U'\uffff', U'\U0001F600', U'\U0010FFFF'}) {
    AppendUtf8(cp, &all);
  }
  EXPECT_EQ(tok->Decode(Encode(*tok, all)), all);
}

TEST(TokenizerTest, InvalidUtf8IsAnError) {
  auto tok = TinyTokenizer({});
  ASSERT_TRUE(tok.ok());
  auto ids = tok->Encode("ok\xC3(", true);
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("not valid UTF-8 (at byte 2)"), std::string::npos);
}

TEST(TokenizerTest, AddedTokensMatchLongestFirstAndDecode) {
  TinyTokenizerSpec spec;
  spec.added_tokens = {Added(300, "<|eot|>"), Added(301, "<|eot|>x"), Added(302, "[x]", false)};
  auto tok = TinyTokenizer(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(Encode(*tok, "a<|eot|>xb<|eot|>"), (Ids{'a', 301, 'b', 300}));
  EXPECT_EQ(Encode(*tok, "<|eot|[x]"), (Ids{'<', '|', 'e', 'o', 't', '|', 302}));
  EXPECT_EQ(tok->Decode(Ids{'a', 300, 302}), "a<|eot|>[x]");
  EXPECT_EQ(tok->Decode(Ids{'a', 300, 302}, /*skip_special_tokens=*/true), "a[x]");
  EXPECT_TRUE(tok->IsSpecial(300));
  EXPECT_FALSE(tok->IsSpecial(302));
  EXPECT_EQ(tok->TokenToId("<|eot|>"), 300);
  EXPECT_EQ(tok->IdToToken(301), "<|eot|>x");
  EXPECT_EQ(tok->id_limit(), 303);
  EXPECT_EQ(tok->Decode(Ids{'a', 999, -5, 'b'}), "ab");  // unknown ids are skipped
}

TEST(TokenizerTest, LstripRstripAndSingleWord) {
  TinyTokenizerSpec spec;
  nlohmann::json mask = Added(300, "<m>", false);
  mask["lstrip"] = true;
  mask["rstrip"] = true;
  mask["normalized"] = false;
  nlohmann::json word = Added(301, "<w>", false);
  word["single_word"] = true;
  word["normalized"] = false;
  spec.added_tokens = {mask, word};
  auto tok = TinyTokenizer(spec);
  ASSERT_TRUE(tok.ok());
  auto spans = tok->EncodeWithOffsets("a \t<m>  b", true);
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(spans->size(), 3u);
  EXPECT_EQ((*spans)[1].id, 300);
  EXPECT_EQ((*spans)[1].begin, 1u);  // the white space on both sides belongs to the token
  EXPECT_EQ((*spans)[1].end, 8u);
  EXPECT_EQ(Encode(*tok, "x<w> <w>"), (Ids{'x', '<', 'w', '>', ' ', 301}));
  EXPECT_EQ(Encode(*tok, "<w>."), (Ids{301, '.'}));
}

TEST(TokenizerTest, TemplateProcessingAddsBosOnlyWithSpecialTokens) {
  TinyTokenizerSpec spec;
  spec.added_tokens = {Added(300, "<s>")};
  spec.post_processor = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {300}}, {"tokens", {"<s>"}}}}}}};
  auto tok = TinyTokenizer(spec);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(Encode(*tok, "hi"), (Ids{300, 'h', 'i'}));
  EXPECT_EQ(Encode(*tok, "hi", false), (Ids{'h', 'i'}));
  EXPECT_EQ(Encode(*tok, ""), (Ids{300}));
  ASSERT_TRUE(tok->bos().has_value());  // no config: the template names the BOS token
  EXPECT_EQ(tok->bos()->id, 300);
}

TEST(TokenizerTest, OffsetsPointIntoTheInput) {
  TinyTokenizerSpec spec;
  spec.merges = {{"h", "i"}};
  auto tok = TinyTokenizer(spec);
  ASSERT_TRUE(tok.ok());
  auto spans = tok->EncodeWithOffsets("hi hi\n", false);
  ASSERT_TRUE(spans.ok());
  std::vector<std::pair<uint32_t, uint32_t>> got;
  for (const auto& s : *spans) got.emplace_back(s.begin, s.end);
  EXPECT_EQ(got, (std::vector<std::pair<uint32_t, uint32_t>>{{0, 2}, {2, 3}, {3, 5}, {5, 6}}));
}

TEST(TokenizerTest, NfcNormalizerComposesAndKeepsOffsets) {
  TinyTokenizerSpec spec;
  spec.normalizer = {{"type", "NFC"}};
  auto tok = TinyTokenizer(spec);
  ASSERT_TRUE(tok.ok());
  // "e" + COMBINING ACUTE (3 bytes) -> "é" U+00E9 = C3 A9.
  auto spans = tok->EncodeWithOffsets("xe\xCC\x81y", false);
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(spans->size(), 4u);
  EXPECT_EQ((*spans)[1].id, 0xC3);
  EXPECT_EQ((*spans)[2].id, 0xA9);
  EXPECT_EQ((*spans)[1].begin, 1u);
  EXPECT_EQ((*spans)[3].begin, 4u);  // "y" is still at byte 4 of the input
  EXPECT_EQ(tok->Decode(Ids{'x', 0xC3, 0xA9, 'y'}), "x\xC3\xA9y");
}

TEST(TokenizerTest, ConfigTokensAsStringsOrDicts) {
  TinyTokenizerSpec spec;
  spec.added_tokens = {Added(300, "<s>"), Added(301, "</s>"), Added(302, "<pad>")};
  nlohmann::json config = {
      {"bos_token", "<s>"},
      {"eos_token", {{"content", "</s>"}, {"__type", "AddedToken"}}},
      {"pad_token", nullptr},
      {"chat_template",
       {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}}}};
  auto tok = TinyTokenizer(spec, config);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->bos()->id, 300);
  EXPECT_EQ(tok->eos()->id, 301);
  EXPECT_FALSE(tok->pad().has_value());
  EXPECT_EQ(tok->padding_id(), 301);  // no pad token: eos pads (labels are -100 there anyway)
  EXPECT_EQ(tok->chat_template(), "D");

  auto bad = TinyTokenizer(spec, {{"eos_token", "<|nope|>"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/tiny/tokenizer_config.json: eos_token: \"<|nope|>\" is "
                                        "not a token"),
            std::string::npos)
      << bad.status().message();
}

Status LoadError(const nlohmann::json& tokenizer_json) {
  Tokenizer::Files files;
  files.tokenizer_json = tokenizer_json.dump();
  files.origin = "/m";
  auto tok = Tokenizer::FromFiles(files);
  return tok.ok() ? Status::Ok() : tok.status();
}

TEST(TokenizerTest, UnsupportedOrBrokenFilesNameTheField) {
  nlohmann::json base = TinyTokenizerJson({});
  struct Case {
    std::string path;
    nlohmann::json value;
    std::string needle;
  } cases[] = {
      {"/model/type", "Unigram", "/m/tokenizer.json: model.type: \"Unigram\" is not supported"},
      {"/model/merges", nlohmann::json::parse(R"([["zz", "q"]])"),
       "model.merges[0]: \"zz q\" uses \"zz\""},
      {"/model/merges", nlohmann::json::parse(R"(["a b c"])"),
       "model.merges[0]: \"a b c\" should be two tokens"},
      {"/model/byte_fallback", true, "model.byte_fallback: true is not supported"},
      {"/pre_tokenizer", nullptr, "pre_tokenizer: is null"},
      {"/pre_tokenizer", {{"type", "Metaspace"}}, "pre-tokenizer type \"Metaspace\""},
      {"/pre_tokenizer/pretokenizers/0/pattern/Regex", "(", "pretokenizers[0].pattern: invalid"},
      {"/pre_tokenizer/pretokenizers/0/behavior", "MergedWithNext", "behavior: \"MergedWithNext\""},
      {"/normalizer", {{"type", "NFKD"}}, "normalizer type \"NFKD\" is not supported"},
      {"/decoder", {{"type", "WordPiece"}}, "decoder \"WordPiece\" is not supported"},
      {"/post_processor", {{"type", "BertProcessing"}}, "\"BertProcessing\" is not supported"},
      {"/added_tokens", nlohmann::json::parse(R"([{"content": "x"}])"),
       "added_tokens[0]: expected {\"id\""},
      // Ids size arrays: a huge one was std::bad_alloc (an abort), INT32_MAX an overflow.
      {"/model/vocab/x", 1000000000, "model.vocab: token \"x\" has id 1000000000; ids above"},
      {"/model/vocab/x", 2147483647, "model.vocab: token \"x\" has id 2147483647; ids above"},
  };
  for (const auto& c : cases) {
    nlohmann::json broken = base;
    broken[nlohmann::json::json_pointer(c.path)] = c.value;
    Status s = LoadError(broken);
    EXPECT_FALSE(s.ok()) << c.path;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << c.path << ": " << s.message();
  }
  Tokenizer::Files files;
  files.tokenizer_json = "{\n \"model\": [1,\n";
  files.origin = "/m";
  auto tok = Tokenizer::FromFiles(files);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("/m/tokenizer.json:3:1: invalid JSON"), std::string::npos)
      << tok.status().message();
}

TEST(TokenizerTest, LoadsADirectoryAndSaysWhatIsMissing) {
  Env* env = DefaultEnv();
  char tmpl[] = "/tmp/air_tok_test_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  auto missing = Tokenizer::Load(dir, env);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir + "/tokenizer.json: no tokenizer.json"),
            std::string::npos);
  TinyTokenizerSpec spec;
  spec.added_tokens = {Added(300, "<|eot|>")};
  ASSERT_TRUE(env->WriteFileAtomic(dir + "/tokenizer.json", TinyTokenizerJson(spec).dump()).ok());
  ASSERT_TRUE(env->WriteFileAtomic(dir + "/tokenizer_config.json",
                                   R"({"eos_token": "<|eot|>", "chat_template": "old"})")
                  .ok());
  ASSERT_TRUE(env->WriteFileAtomic(dir + "/chat_template.jinja", "new").ok());
  auto tok = Tokenizer::Load(dir, env);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->eos()->id, 300);
  EXPECT_EQ(tok->chat_template(), "new");  // chat_template.jinja wins, as in transformers
  auto by_file = Tokenizer::Load(dir + "/tokenizer.json", env);
  ASSERT_TRUE(by_file.ok());
  EXPECT_EQ(by_file->eos()->id, 300);
  ASSERT_TRUE(env->RemoveAll(dir).ok());
}

}  // namespace
}  // namespace air::engine
