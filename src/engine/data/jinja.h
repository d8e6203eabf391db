// JinjaTemplate: a small Jinja2 interpreter, enough for the chat templates found in
// tokenizer_config.json files (Llama 3.x, Qwen2/2.5, Mistral, Gemma, ChatML, ...), rendering
// them as transformers does (jinja2 with trim_blocks, lstrip_blocks, loop controls, and its
// globals raise_exception, strftime_now, namespace, dict and a json.dumps-style tojson).
//
// Supported: text; {{ expr }}; {# comments #}; whitespace control (-, +); {% if/elif/else %},
// {% for x in xs [if cond] %} (tuple targets, loop.index/index0/first/last/length/revindex,
// else), {% set x = e %} and {% set ns.attr = e %}, {% break %}, {% continue %},
// {% generation %} (rendered as its body; RenderWithGenerationSpans reports where each one's
// output lies, as transformers' return_assistant_tokens_mask uses it), {% macro %} with call;
// expressions with literals, lists, dicts, attribute/item access, slices, calls, filters, tests (is
// [not] ...), Python operators and `a if c else b`. Anything else is a parse error naming the line.
// Thread safety: a parsed template is immutable; Render() may run on several threads.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace air::engine::jinja {

struct Node;

// A rendering and the byte ranges [begin, end) of the text each {% generation %} block wrote,
// in order.
struct RenderedTemplate {
  std::string text;
  std::vector<std::pair<size_t, size_t>> generation_spans;
};

class JinjaTemplate {
 public:
  // Parses `source`; errors read "line N: ...".
  static Result<JinjaTemplate> Parse(std::string_view source);

  // Renders with `context` (a JSON object: messages, add_generation_prompt, bos_token, ...).
  // raise_exception(msg) in the template becomes an error with msg.
  Result<std::string> Render(const nlohmann::json& context) const;
  // The same, with the spans of the {% generation %} blocks.
  Result<RenderedTemplate> RenderWithGenerationSpans(const nlohmann::json& context) const;
  // Whether the template has a {% generation %} block.
  bool has_generation_blocks() const { return has_generation_blocks_; }

 private:
  std::shared_ptr<const std::vector<Node>> body_;
  bool has_generation_blocks_ = false;
};

}  // namespace air::engine::jinja
