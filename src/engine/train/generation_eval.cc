// Held-out generation prompts and scoring (see generation_eval.h).
#include "engine/train/generation_eval.h"

#include <fmt/format.h>

#include <optional>

#include "base/strings.h"
#include "engine/data/chat_template.h"
#include "engine/data/examples.h"

namespace air::engine::train {

Result<std::vector<EvalPrompt>> EvalPromptsFromRecords(const std::vector<DatasetRecord>& records,
                                                       const Tokenizer& tokenizer) {
  std::vector<EvalPrompt> prompts;
  std::optional<ChatTemplate> chat_template;
  for (const DatasetRecord& r : records) {
    EvalPrompt p;
    p.source = r.source;
    if (r.kind == DatasetRecord::Kind::kInstruction) {
      p.text = AlpacaPrompt(r.instruction, r.input);
      p.expected = r.output;
    } else {
      size_t last = r.messages.size();
      while (last > 0 && r.messages[last - 1].role != "assistant") --last;
      if (last == 0) {
        return InvalidArgument(
            fmt::format("{}: messages: no assistant message to compare "
                        "the generation with",
                        r.source));
      }
      if (!chat_template) {
        auto found = ChatTemplate::ForTokenizer(tokenizer);
        if (!found.ok()) return found.status().WithContext(r.source);
        chat_template = std::move(*found);
      }
      std::vector<ChatMessage> context(r.messages.begin(), r.messages.begin() + (last - 1));
      p.text = chat_template->RenderText(context, /*add_generation_prompt=*/true);
      p.add_special_tokens = false;  // the template writes them
      p.expected = r.messages[last - 1].content;
    }
    prompts.push_back(std::move(p));
  }
  return prompts;
}

bool ExactMatch(const std::string& generated, const std::string& expected) {
  return Trim(generated) == Trim(expected);
}

std::vector<int64_t> EndOfGenerationIds(const CausalLm& model, const Tokenizer& tokenizer,
                                        bool chat) {
  std::vector<int64_t> ids = model.config().eos_token_ids;
  if (tokenizer.eos()) ids.push_back(tokenizer.eos()->id);
  if (chat) {
    for (const char* end_of_turn : {"<|eot_id|>", "<|im_end|>"}) {
      if (auto id = tokenizer.TokenToId(end_of_turn)) ids.push_back(*id);
    }
  }
  return ids;
}

}  // namespace air::engine::train
