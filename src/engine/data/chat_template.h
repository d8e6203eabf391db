// ChatTemplate: turns a conversation (role/content messages) into the text a chat model was
// trained on, and says which characters of it are the assistant's (the only ones a fine-tune
// should learn to produce).
//
// A tokenizer's own Jinja chat_template is rendered by air's Jinja interpreter (jinja.h) as
// transformers renders it (with messages, add_generation_prompt, bos/eos/pad tokens, tools and
// documents set to None). When that template uses Jinja that the interpreter lacks, or there is
// no template, two families are built in, rendering exactly what their templates render:
//   kLlama3:  [bos]<|start_header_id|>ROLE<|end_header_id|>\n\n CONTENT(trimmed) <|eot_id|> ...
//             and, with add_generation_prompt, <|start_header_id|>assistant<|end_header_id|>\n\n
//   kChatMl:  <|im_start|>ROLE\n CONTENT <|im_end|>\n ... (Qwen2 adds a default system turn
//             "You are a helpful assistant." when the first message is not a system one), and,
//             with add_generation_prompt, <|im_start|>assistant\n
// ForTokenizer() uses the Jinja template when it parses and renders a sample conversation;
// otherwise it picks a built-in family from the template's Llama 3 or ChatML markers (including
// Qwen2's default system prompt) or, without a template, from the tokenizer's special tokens.
//
// Assistant spans, in order of preference:
//   - a template with {% generation %} blocks (TRL's training templates): the blocks' output, as
//     transformers' return_assistant_tokens_mask reads them;
//   - a harmony template (gpt-oss: <|start|>, <|channel|>, <|message|>): every message the
//     assistant authored, <|start|> through its end token (harmony.h) — TRL's masks for it;
//   - otherwise from rendering prefixes of the conversation: the text an assistant message adds
//     after the generation prompt — its content and end-of-turn token, without the trailing
//     newline — is its span.
// So the model learns to answer and to stop.
// Thread safety: immutable value; Render() is a pure function.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/data/jinja.h"
#include "engine/data/tokenizer.h"

namespace air::engine {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (others are rendered as given)
  std::string content;
  // The message's other keys (e.g. "thinking", "tool_calls"), visible to Jinja templates.
  nlohmann::json fields = nlohmann::json::object();
};

// A rendered conversation: the text and the byte ranges [begin, end) that are assistant output.
struct RenderedChat {
  std::string text;
  std::vector<std::pair<size_t, size_t>> assistant_spans;
};

// The "messages" list of a chat record: [{"role": str, "content": str}, ...] (other keys are
// ignored). `where` (e.g. "train.jsonl:12") prefixes errors, which name the message and field.
Result<std::vector<ChatMessage>> ParseChatMessages(const nlohmann::json& record,
                                                   const std::string& where);

class ChatTemplate {
 public:
  enum class Family { kLlama3, kChatMl, kJinja };

  // `bos_token` is written before the first Llama 3 message; `default_system` (ChatML only)
  // is the system turn added when a conversation has none ("" for none).
  ChatTemplate(Family family, std::string bos_token, std::string default_system)
      : family_(family),
        bos_token_(std::move(bos_token)),
        default_system_(std::move(default_system)) {}

  // The template for a tokenizer, chosen as described above; an error names the tokenizer's
  // files when neither family fits.
  static Result<ChatTemplate> ForTokenizer(const Tokenizer& tokenizer);

  // A template rendered by the Jinja interpreter; `special_tokens` holds bos_token, eos_token,
  // ... for the template; `fallback` is the built-in family recognized in it, if any.
  // `harmony`: the template writes harmony (IsHarmonyTemplate of its source).
  ChatTemplate(std::shared_ptr<const jinja::JinjaTemplate> jinja, nlohmann::json special_tokens,
               std::optional<ChatTemplate> fallback, bool harmony = false);

  // The conversation's text. With add_generation_prompt the assistant header follows, so a
  // model continues with its answer. Errors come only from Jinja templates (raise_exception).
  Result<std::string> RenderChecked(const std::vector<ChatMessage>& messages,
                                    bool add_generation_prompt) const;
  // The same for callers that cannot fail: when a Jinja template raises on this conversation,
  // the built-in family's rendering (or "" when none was recognized).
  std::string RenderText(const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt) const;

  // The text and the assistant spans. An empty conversation is an error.
  Result<RenderedChat> Render(const std::vector<ChatMessage>& messages,
                              bool add_generation_prompt) const;

  Family family() const { return jinja_ ? Family::kJinja : family_; }
  bool harmony() const { return harmony_; }
  const std::string& default_system() const { return default_system_; }

 private:
  std::string RenderBuiltin(const std::vector<ChatMessage>& messages,
                            bool add_generation_prompt) const;
  // The Jinja template's rendering, with its {% generation %} spans.
  Result<jinja::RenderedTemplate> RenderJinja(const std::vector<ChatMessage>& messages,
                                              bool add_generation_prompt) const;

  Family family_;
  std::string bos_token_;
  std::string default_system_;
  std::shared_ptr<const jinja::JinjaTemplate> jinja_;
  nlohmann::json special_tokens_;
  bool has_builtin_ = true;
  bool harmony_ = false;
};

// Python's str.strip() (and so Jinja's `trim`): removes Unicode white space at both ends.
std::string PyStrip(std::string_view text);

}  // namespace air::engine
