// Held-out generation checks: turns dataset records into prompts with their expected answers,
// and scores what a model generates for them by exact match (after trimming white space).
//   alpaca record -> the seed's prompt ("### Instruction: ... ### Response:\n", tokenized like
//                    the training text, i.e. with the tokenizer's special tokens) and `output`;
//   chat record   -> the conversation up to its last assistant message, rendered by the chat
//                    template with the generation prompt, and that message's content.
// `air generate --dataset FILE` uses it to show what a fine-tune learned (docs/engine-
// training.md records before/after on the quickstart's held-out split).
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/data/dataset.h"
#include "engine/data/tokenizer.h"
#include "engine/model/causal_lm.h"

namespace air::engine::train {

struct EvalPrompt {
  std::string source;  // "FILE:LINE" of the record
  std::string text;    // the prompt text fed to the model
  bool add_special_tokens = true;
  std::string expected;
};

Result<std::vector<EvalPrompt>> EvalPromptsFromRecords(const std::vector<DatasetRecord>& records,
                                                       const Tokenizer& tokenizer);

// Exact match after trimming ASCII white space at both ends.
bool ExactMatch(const std::string& generated, const std::string& expected);

// The ids that end a generation: the model config's eos ids, the tokenizer's eos and, for chat
// prompts, the chat template's end-of-turn token (<|eot_id|> or <|im_end|>) when it exists.
std::vector<int64_t> EndOfGenerationIds(const CausalLm& model, const Tokenizer& tokenizer,
                                        bool chat);

}  // namespace air::engine::train
