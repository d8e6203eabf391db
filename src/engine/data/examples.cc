// Records -> tokenized, labelled examples (see examples.h).
#include "engine/data/examples.h"

#include <fmt/format.h>

#include <optional>

namespace air::engine {

std::string AlpacaPrompt(const std::string& instruction, const std::string& input) {
  std::string prompt = "### Instruction:\n" + instruction + "\n\n";
  if (!input.empty()) prompt += "### Input:\n" + input + "\n\n";
  return prompt + "### Response:\n";
}

Result<ChatTokens> TokenizeRendered(const Tokenizer& tokenizer, const RenderedChat& rendered) {
  AIR_ASSIGN_OR_RETURN(auto spans,
                       tokenizer.EncodeWithOffsets(rendered.text, /*add_special_tokens=*/false));
  ChatTokens out;
  out.input_ids.reserve(spans.size());
  out.assistant_mask.reserve(spans.size());
  size_t s = 0;  // spans are sorted and tokens come in text order
  for (const TokenSpan& t : spans) {
    while (s < rendered.assistant_spans.size() && rendered.assistant_spans[s].second <= t.begin) {
      ++s;
    }
    bool inside = s < rendered.assistant_spans.size() && t.end > t.begin &&
                  t.begin < rendered.assistant_spans[s].second &&
                  t.end > rendered.assistant_spans[s].first;
    out.input_ids.push_back(t.id);
    out.assistant_mask.push_back(inside ? 1 : 0);
  }
  return out;
}

Result<TokenizedExample> TokenizeRecord(const DatasetRecord& record, const Tokenizer& tokenizer,
                                        const ChatTemplate* chat_template, bool train_on_prompt) {
  TokenizedExample ex;
  ex.source = record.source;
  if (record.kind == DatasetRecord::Kind::kChat) {
    if (chat_template == nullptr) return Internal("chat record without a chat template");
    auto rendered = chat_template->Render(record.messages, /*add_generation_prompt=*/false);
    if (!rendered.ok()) return rendered.status().WithContext(record.source);
    auto tokens = TokenizeRendered(tokenizer, *rendered);
    if (!tokens.ok()) return tokens.status().WithContext(record.source);
    ex.input_ids = std::move(tokens->input_ids);
    ex.labels.resize(ex.input_ids.size());
    for (size_t i = 0; i < ex.input_ids.size(); ++i) {
      ex.labels[i] = train_on_prompt || tokens->assistant_mask[i] ? ex.input_ids[i] : kIgnoreIndex;
    }
    return ex;
  }
  if (!tokenizer.eos()) {
    return InvalidArgument(fmt::format(
        "{}: alpaca records end with the eos_token, but {} defines none (set eos_token in "
        "tokenizer_config.json)",
        record.source, tokenizer.origin()));
  }
  std::string prompt = AlpacaPrompt(record.instruction, record.input);
  std::string text = prompt + record.output + tokenizer.eos()->content;
  auto spans = tokenizer.EncodeWithOffsets(text, /*add_special_tokens=*/true);
  if (!spans.ok()) return spans.status().WithContext(record.source);
  for (const TokenSpan& t : *spans) {
    ex.input_ids.push_back(t.id);
    // A token belongs to the response when it ends past the prompt; tokens the post-processor
    // added (BOS, empty span) never do.
    bool response = t.end > prompt.size();
    ex.labels.push_back(train_on_prompt || response ? t.id : kIgnoreIndex);
  }
  return ex;
}

Result<BuiltExamples> BuildExamples(const std::vector<DatasetRecord>& records,
                                    const Tokenizer& tokenizer, const ExampleOptions& options) {
  if (records.empty()) return InvalidArgument("empty dataset: there are no records");
  if (options.max_seq_len < 2) {
    return InvalidArgument(
        fmt::format("max_seq_len: {} is too small; it must be at least 2", options.max_seq_len));
  }
  std::optional<ChatTemplate> chat_template;
  BuiltExamples built;
  built.examples.reserve(records.size());
  for (const DatasetRecord& record : records) {
    if (record.kind == DatasetRecord::Kind::kChat && !chat_template) {
      auto found = ChatTemplate::ForTokenizer(tokenizer);
      if (!found.ok()) return found.status().WithContext(record.source);
      chat_template.emplace(*found);
    }
    AIR_ASSIGN_OR_RETURN(
        TokenizedExample ex,
        TokenizeRecord(record, tokenizer, chat_template ? &*chat_template : nullptr,
                       options.train_on_prompt));
    ++built.stats.records;
    if (ex.input_ids.size() > static_cast<size_t>(options.max_seq_len)) {
      ex.input_ids.resize(options.max_seq_len);
      ex.labels.resize(options.max_seq_len);
      ++built.stats.truncated;
    }
    // Labels at position 0 are never predicted (the model shifts), so they do not count.
    int64_t loss_tokens = 0;
    for (size_t i = 1; i < ex.labels.size(); ++i) loss_tokens += ex.labels[i] != kIgnoreIndex;
    if (loss_tokens == 0) {
      ++built.stats.dropped_no_loss;
      continue;
    }
    built.stats.tokens += static_cast<int64_t>(ex.input_ids.size());
    built.stats.loss_tokens += loss_tokens;
    built.examples.push_back(std::move(ex));
  }
  built.stats.examples = static_cast<int64_t>(built.examples.size());
  if (built.examples.empty()) {
    return InvalidArgument(fmt::format(
        "no usable examples: all {} records lost their response to truncation at max_seq_len={} "
        "(raise max_seq_len or shorten the prompts)",
        built.stats.records, options.max_seq_len));
  }
  return built;
}

}  // namespace air::engine
