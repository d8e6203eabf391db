// Training examples: dataset records rendered to text, tokenized, and labelled so that the loss
// counts only what the model should learn to write.
//
// Alpaca records use the first seed's prompt, tokenized as one text like the seed does
// (tokenizer(text), so Llama 3 gets its <|begin_of_text|>):
//   "### Instruction:\n{instruction}\n\n" + ("### Input:\n{input}\n\n" if input) +
//   "### Response:\n" + output + eos_token
// Chat records are rendered with the tokenizer's chat template (chat_template.h) and tokenized
// without adding special tokens (the template writes them), as apply_chat_template does.
// Labels follow Hugging Face: labels[t] = input_ids[t] where the token is part of the response
// (alpaca: ends after the prompt; chat: overlaps an assistant span), kIgnoreIndex (-100)
// elsewhere; the model shifts them. Examples longer than max_seq_len keep their first
// max_seq_len tokens. An example left with no label (e.g. its response was cut off) is dropped
// and counted.
// Thread safety: pure functions (the tokenizer is used read-only).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/data/batch.h"
#include "engine/data/chat_template.h"
#include "engine/data/dataset.h"
#include "engine/data/tokenizer.h"

namespace air::engine {

struct ExampleOptions {
  int max_seq_len = 2048;
  // Learn the prompt too (the seed's behaviour, minus its padding). Off by default.
  bool train_on_prompt = false;
};

struct TokenizedExample {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;  // same length; kIgnoreIndex where no loss is taken
  std::string source;           // "FILE:LINE" of the record
};

struct ExampleStats {
  int64_t records = 0;
  int64_t examples = 0;
  int64_t truncated = 0;        // longer than max_seq_len, cut
  int64_t dropped_no_loss = 0;  // nothing left to learn after truncation
  int64_t tokens = 0;
  int64_t loss_tokens = 0;
};

struct BuiltExamples {
  std::vector<TokenizedExample> examples;
  ExampleStats stats;
};

// The alpaca prompt (everything before the response).
std::string AlpacaPrompt(const std::string& instruction, const std::string& input);

// A rendered chat conversation tokenized: ids and, per token, 1 when it overlaps an assistant
// span.
struct ChatTokens {
  std::vector<int32_t> input_ids;
  std::vector<uint8_t> assistant_mask;
};
Result<ChatTokens> TokenizeRendered(const Tokenizer& tokenizer, const RenderedChat& rendered);

// One record as an example (not yet truncated). `chat_template` is needed for chat records only.
Result<TokenizedExample> TokenizeRecord(const DatasetRecord& record, const Tokenizer& tokenizer,
                                        const ChatTemplate* chat_template, bool train_on_prompt);

// Every record as a truncated example, with statistics. Errors name the record's FILE:LINE.
// The chat template is looked up only when a chat record is present.
Result<BuiltExamples> BuildExamples(const std::vector<DatasetRecord>& records,
                                    const Tokenizer& tokenizer, const ExampleOptions& options);

}  // namespace air::engine
