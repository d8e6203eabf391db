// Tests for chat templates and labelled examples: Llama 3 / ChatML rendering and assistant spans,
// template detection, alpaca prompt masking, chat masking, truncation and dropped examples.
#include "engine/data/examples.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/data/chat_template.h"
#include "unit/engine_data/test_tokenizers.h"

namespace air::engine {
namespace {

using testing::Added;
using ::testing::HasSubstr;
using testing::TinyTokenizer;
using testing::TinyTokenizerSpec;

std::vector<ChatMessage> Conversation() {
  return {{"system", "Be brief."},
          {"user", " Hi "},
          {"assistant", "Hello!\n"},
          {"user", "Bye"},
          {"assistant", "Bye."}};
}

std::vector<std::string> Spans(const RenderedChat& r) {
  std::vector<std::string> out;
  for (auto [b, e] : r.assistant_spans) out.push_back(r.text.substr(b, e - b));
  return out;
}

TEST(ChatTemplateTest, Llama3RendersTrimmedTurnsAndAssistantSpans) {
  ChatTemplate t(ChatTemplate::Family::kLlama3, "<|begin_of_text|>", "");
  auto r = t.Render(Conversation(), false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nBye.<|eot_id|>");
  EXPECT_EQ(Spans(*r), (std::vector<std::string>{"Hello!<|eot_id|>", "Bye.<|eot_id|>"}));
  EXPECT_TRUE(t.RenderText({{"user", "Q"}}, true)
                  .ends_with("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"));
}

TEST(ChatTemplateTest, ChatMlAddsTheDefaultSystemTurnWhenMissing) {
  ChatTemplate t(ChatTemplate::Family::kChatMl, "", "You are a helpful assistant.");
  auto r = t.Render({{"user", "Q"}, {"assistant", "A"}}, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nQ"
            "<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(Spans(*r), (std::vector<std::string>{"A<|im_end|>"}));
  auto with_system = t.Render({{"system", "S"}, {"user", "Q"}, {"assistant", "A"}}, false);
  ASSERT_TRUE(with_system.ok());
  EXPECT_TRUE(with_system->text.starts_with("<|im_start|>system\nS<|im_end|>\n<|im_start|>user"));
  auto opening = t.Render({{"assistant", "A"}}, false);
  ASSERT_FALSE(opening.ok());
  EXPECT_THAT(
      opening.status().message(),
      HasSubstr("messages[0]: the chat template does not render this conversation's prefixes"));
}

TEST(ChatTemplateTest, PyStripMatchesPythonWhiteSpace) {
  EXPECT_EQ(PyStrip(" \t\n x y \x1c\xC2\xA0\xE3\x80\x80"), "x y");
  EXPECT_EQ(PyStrip("\xE2\x80\x8Bx"), "\xE2\x80\x8Bx");  // U+200B is not white space
  EXPECT_EQ(PyStrip("   "), "");
}

TEST(ChatTemplateTest, ChosenFromTheTokenizersTemplateOrTokens) {
  TinyTokenizerSpec spec;
  spec.added_tokens = {Added(300, "<|im_start|>"), Added(301, "<|im_end|>")};
  auto qwen = TinyTokenizer(
      spec, {{"chat_template",
              "{% for message in messages %}{% if loop.first and messages[0]['role'] != "
              "'system' %}{{ '<|im_start|>system\\nYou are Qwen.\\nBe nice.<|im_end|>\\n' }}"
              "{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
              "'<|im_end|>' + '\\n'}}{% endfor %}"}});
  ASSERT_TRUE(qwen.ok()) << qwen.status().ToString();
  auto t = ChatTemplate::ForTokenizer(*qwen);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->family(), ChatTemplate::Family::kJinja);       // rendered by the Jinja interpreter
  EXPECT_EQ(t->default_system(), "You are Qwen.\nBe nice.");  // what the fallback would use
  EXPECT_EQ(
      t->RenderText({{"user", "Q"}}, false),
      "<|im_start|>system\nYou are Qwen.\nBe nice.<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n");
  auto bare = TinyTokenizer(spec);  // no template: the special tokens decide
  ASSERT_TRUE(bare.ok());
  auto t2 = ChatTemplate::ForTokenizer(*bare);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->family(), ChatTemplate::Family::kChatMl);
  EXPECT_EQ(t2->default_system(), "");
  auto other = TinyTokenizer(
      {}, {{"chat_template", "{% for m in messages %}{{ m.content | frob }}{% endfor %}"}});
  ASSERT_TRUE(other.ok());
  auto t3 = ChatTemplate::ForTokenizer(*other);
  ASSERT_FALSE(t3.ok());
  EXPECT_THAT(
      t3.status().message(),
      HasSubstr("/tiny/tokenizer_config.json: chat_template could not be rendered (chat_template: "
                "line 1: filter 'frob' is not supported), and it is neither"));
}

// A tokenizer with the Llama 3 chat tokens and an EOS, for example building.
Result<Tokenizer> LlamaLike() {
  TinyTokenizerSpec spec;
  spec.added_tokens = {Added(300, "<|begin_of_text|>"), Added(301, "<|eot_id|>"),
                       Added(302, "<|start_header_id|>"), Added(303, "<|end_header_id|>")};
  spec.post_processor = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<|begin_of_text|>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
      {"special_tokens", {{"<|begin_of_text|>", {{"ids", {300}}}}}}};
  return TinyTokenizer(spec, {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}});
}

DatasetRecord Alpaca(std::string instruction, std::string input, std::string output) {
  DatasetRecord r;
  r.instruction = std::move(instruction);
  r.input = std::move(input);
  r.output = std::move(output);
  r.source = "t.jsonl:1";
  return r;
}

TEST(ExamplesTest, AlpacaMasksThePromptAndLearnsResponseAndEos) {
  auto tok = LlamaLike();
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(AlpacaPrompt("Do", ""), "### Instruction:\nDo\n\n### Response:\n");
  EXPECT_EQ(AlpacaPrompt("Do", "x"), "### Instruction:\nDo\n\n### Input:\nx\n\n### Response:\n");
  auto ex = TokenizeRecord(Alpaca("Do", "x", "ok"), *tok, nullptr, false);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  std::string prompt = AlpacaPrompt("Do", "x");
  ASSERT_EQ(ex->input_ids.size(), 1 + prompt.size() + 2 + 1);  // BOS, bytes, "ok", EOS
  EXPECT_EQ(ex->input_ids.front(), 300);
  EXPECT_EQ(ex->input_ids.back(), 301);
  for (size_t i = 0; i <= prompt.size(); ++i) EXPECT_EQ(ex->labels[i], kIgnoreIndex) << i;
  EXPECT_EQ(ex->labels[prompt.size() + 1], 'o');
  EXPECT_EQ(ex->labels[prompt.size() + 2], 'k');
  EXPECT_EQ(ex->labels.back(), 301);
  auto all = TokenizeRecord(Alpaca("Do", "x", "ok"), *tok, nullptr, true);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->labels, all->input_ids);
}

TEST(ExamplesTest, ChatLabelsOnlyAssistantTokens) {
  auto tok = LlamaLike();
  ASSERT_TRUE(tok.ok());
  DatasetRecord r;
  r.kind = DatasetRecord::Kind::kChat;
  r.messages = {{"user", "Q"}, {"assistant", "A"}};
  r.source = "c.jsonl:7";
  auto t = ChatTemplate::ForTokenizer(*tok);
  ASSERT_TRUE(t.ok());
  auto ex = TokenizeRecord(r, *tok, &*t, false);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<int32_t> learned;
  for (size_t i = 0; i < ex->labels.size(); ++i) {
    if (ex->labels[i] != kIgnoreIndex) learned.push_back(ex->input_ids[i]);
  }
  EXPECT_EQ(learned, (std::vector<int32_t>{'A', 301}));
  EXPECT_EQ(ex->input_ids.front(), 300);  // BOS written by the template, not added again
  EXPECT_EQ(std::count(ex->input_ids.begin(), ex->input_ids.end(), 300), 1);
}

TEST(ExamplesTest, TruncationAndExamplesLeftWithoutLabels) {
  auto tok = LlamaLike();
  ASSERT_TRUE(tok.ok());
  std::vector<DatasetRecord> records = {Alpaca("Do", "", "yes"), Alpaca("A much longer "
                                                                        "instruction",
                                                                        "", "y")};
  ExampleOptions options;
  options.max_seq_len = 30;  // both prompts are longer (36 and 59 tokens with BOS)
  auto none = BuildExamples(records, *tok, options);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("no usable examples"));
  options.max_seq_len = 38;  // keeps BOS, the first prompt, and "ye"
  auto built = BuildExamples(records, *tok, options);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ(built->stats.records, 2);
  EXPECT_EQ(built->stats.examples, 1);
  EXPECT_EQ(built->stats.truncated, 2);
  EXPECT_EQ(built->stats.dropped_no_loss, 1);
  ASSERT_EQ(built->examples.size(), 1u);
  EXPECT_EQ(built->examples[0].input_ids.size(), 38u);
  EXPECT_EQ(built->stats.loss_tokens, 2);  // "y", "e" of "yes"; "s" and EOS were cut
  options.max_seq_len = 1;
  EXPECT_THAT(BuildExamples(records, *tok, options).status().message(),
              HasSubstr("max_seq_len: 1 is too small"));
  EXPECT_THAT(BuildExamples({}, *tok, options).status().message(), HasSubstr("empty dataset"));
}

TEST(ExamplesTest, AlpacaWithoutEosAndChatWithoutTemplateAreClearErrors) {
  auto tok = TinyTokenizer({});
  ASSERT_TRUE(tok.ok());
  auto ex = BuildExamples({Alpaca("a", "", "b")}, *tok, {});
  EXPECT_THAT(ex.status().message(), HasSubstr("t.jsonl:1: alpaca records end with the "
                                               "eos_token, but /tiny defines none"));
  DatasetRecord chat;
  chat.kind = DatasetRecord::Kind::kChat;
  chat.messages = {{"user", "Q"}, {"assistant", "A"}};
  chat.source = "c.jsonl:2";
  auto c = BuildExamples({chat}, *tok, {});
  EXPECT_THAT(c.status().message(), HasSubstr("c.jsonl:2: /tiny: the tokenizer has no "
                                              "chat_template"));
}

}  // namespace
}  // namespace air::engine
