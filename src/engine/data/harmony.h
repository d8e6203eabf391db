// Harmony, the message format of OpenAI's gpt-oss models, as their chat template renders it:
//   <|start|>HEADER<|message|>CONTENT<|end|>      (or <|return|> ending the last assistant
//                                                  message of a training example, <|call|> a
//                                                  tool call)
// with HEADER = AUTHOR [" to=" RECIPIENT] ["<|channel|>" CHANNEL [" " CONTENT_TYPE]], AUTHOR one
// of system, developer, user, assistant or a tool ("functions.NAME"). An assistant turn is one or
// more such messages: its reasoning on the analysis channel, its answer on the final channel,
// tool calls on the commentary channel.
//
// What a fine-tune learns of a harmony conversation (the assistant spans) is every message the
// assistant authored, from its <|start|> through its end token: exactly what TRL's
// gptoss_training.jinja wraps in {% generation %} for assistant_only_loss (the model's own
// template has no generation markers, so TRL swaps that one in), and what
// transformers' return_assistant_tokens_mask then marks. HarmonyAssistantSpans computes them from
// the rendered text, so air's rendering of the model's unmodified template gives TRL's masks,
// multi-turn conversations included (earlier assistant turns render as final messages only).
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace air::engine {

// One message of rendered harmony text: [begin, end) runs from its <|start|> through its end
// token.
struct HarmonyMessage {
  size_t begin = 0;
  size_t end = 0;
  std::string author;   // "assistant", "user", "functions.get_weather", ...
  std::string channel;  // "analysis", "final", "commentary" or "" when the header has none
};

// Whether a chat template writes harmony: it has the <|start|>, <|channel|> and <|message|>
// markers.
bool IsHarmonyTemplate(std::string_view template_source);

// The complete messages of `text`, in order. Text outside messages (none in what the template
// renders) and a trailing unterminated header (the generation prompt "<|start|>assistant") are
// not messages.
std::vector<HarmonyMessage> ParseHarmonyMessages(std::string_view text);

// The byte ranges of the assistant's messages, adjacent ones merged.
std::vector<std::pair<size_t, size_t>> HarmonyAssistantSpans(std::string_view text);

}  // namespace air::engine
