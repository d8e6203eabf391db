// Built-in chat templates (Llama 3, ChatML) and assistant spans (see chat_template.h).
#include "engine/data/chat_template.h"

#include <fmt/format.h>

#include "base/log.h"
#include "engine/data/harmony.h"
#include "engine/data/jinja.h"
#include "engine/data/utf8.h"

namespace air::engine {
namespace {

// The default system prompt a ChatML template writes when the conversation has none: the text
// of a literal '<|im_start|>system\n...<|im_end|>' in the template, if there is one.
std::string FindDefaultSystem(const std::string& tmpl) {
  for (std::string_view marker : {"<|im_start|>system\\n", "<|im_start|>system\n"}) {
    size_t pos = 0;
    while ((pos = tmpl.find(marker, pos)) != std::string::npos) {
      size_t start = pos + marker.size();
      size_t end = tmpl.find("<|im_end|>", start);
      pos = start;
      if (end == std::string::npos) break;
      std::string text = tmpl.substr(start, end - start);
      // A literal only: no string concatenation or expression inside.
      if (text.find_first_of("'\"{}+") != std::string::npos) continue;
      std::string unescaped;
      for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
          unescaped.push_back('\n');
          ++i;
        } else {
          unescaped.push_back(text[i]);
        }
      }
      return unescaped;
    }
  }
  return "";
}

}  // namespace

std::string PyStrip(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end) {
    size_t len = Utf8SequenceLength(text, begin);
    if (len == 0 || !IsPythonWhiteSpace(DecodeUtf8At(text, begin, &len))) break;
    begin += len;
  }
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
    size_t len = 0;
    if (Utf8SequenceLength(text, start) == 0 ||
        !IsPythonWhiteSpace(DecodeUtf8At(text, start, &len))) {
      break;
    }
    end = start;
  }
  return std::string(text.substr(begin, end - begin));
}

Result<std::vector<ChatMessage>> ParseChatMessages(const nlohmann::json& record,
                                                   const std::string& where) {
  if (!record.is_object() || !record.contains("messages")) {
    return InvalidArgument(where +
                           ": expected an object with \"messages\": [{\"role\": ..., "
                           "\"content\": ...}, ...]");
  }
  const auto& list = record["messages"];
  if (!list.is_array()) {
    return InvalidArgument(fmt::format(
        "{}: field \"messages\" must be a list of {{\"role\", \"content\"}} objects, got {}", where,
        list.type_name()));
  }
  if (list.empty()) return InvalidArgument(where + ": field \"messages\" is an empty list");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& m = list[i];
    if (!m.is_object()) {
      return InvalidArgument(
          fmt::format("{}: messages[{}] must be an object {{\"role\", \"content\"}}, got {}", where,
                      i, m.type_name()));
    }
    for (const char* field : {"role", "content"}) {
      if (!m.contains(field)) {
        return InvalidArgument(
            fmt::format("{}: messages[{}] has no field \"{}\" (each message needs \"role\" and "
                        "\"content\", both strings)",
                        where, i, field));
      }
      if (!m[field].is_string()) {
        return InvalidArgument(fmt::format("{}: messages[{}].{} must be a string, got {}", where, i,
                                           field, m[field].type_name()));
      }
    }
    ChatMessage message{m["role"].get<std::string>(), m["content"].get<std::string>()};
    for (const auto& [key, value] : m.items()) {
      if (key != "role" && key != "content") message.fields[key] = value;
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

ChatTemplate::ChatTemplate(std::shared_ptr<const jinja::JinjaTemplate> jinja,
                           nlohmann::json special_tokens, std::optional<ChatTemplate> fallback,
                           bool harmony)
    : family_(fallback ? fallback->family_ : Family::kJinja),
      bos_token_(fallback ? fallback->bos_token_ : ""),
      default_system_(fallback ? fallback->default_system_ : ""),
      jinja_(std::move(jinja)),
      special_tokens_(std::move(special_tokens)),
      has_builtin_(fallback.has_value()),
      harmony_(harmony) {}

namespace {

// The built-in family a template's text points to, if any.
std::optional<ChatTemplate> BuiltinFor(const std::string& tmpl, const std::string& bos) {
  if (tmpl.find("<|start_header_id|>") != std::string::npos) {
    return ChatTemplate(ChatTemplate::Family::kLlama3,
                        tmpl.find("bos_token") != std::string::npos ? bos : "", "");
  }
  if (tmpl.find("<|im_start|>") != std::string::npos) {
    return ChatTemplate(ChatTemplate::Family::kChatMl, "", FindDefaultSystem(tmpl));
  }
  return std::nullopt;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::ForTokenizer(const Tokenizer& tokenizer) {
  const std::string& tmpl = tokenizer.chat_template();
  std::string bos = tokenizer.bos() ? tokenizer.bos()->content : "";
  if (!tmpl.empty()) {
    std::optional<ChatTemplate> builtin = BuiltinFor(tmpl, bos);
    nlohmann::json special = nlohmann::json::object();
    if (tokenizer.bos()) special["bos_token"] = tokenizer.bos()->content;
    if (tokenizer.eos()) special["eos_token"] = tokenizer.eos()->content;
    if (tokenizer.pad()) special["pad_token"] = tokenizer.pad()->content;
    Status jinja_status;
    auto parsed = jinja::JinjaTemplate::Parse(tmpl);
    if (parsed.ok()) {
      ChatTemplate candidate(std::make_shared<const jinja::JinjaTemplate>(std::move(*parsed)),
                             special, builtin, IsHarmonyTemplate(tmpl));
      // It must render a plain exchange, with and without the generation prompt.
      auto sample = candidate.RenderChecked({{"user", "Hi"}, {"assistant", "Hello"}}, false);
      auto prompt = candidate.RenderChecked({{"user", "Hi"}}, true);
      if (sample.ok() && prompt.ok()) return candidate;
      jinja_status = sample.ok() ? prompt.status() : sample.status();
    } else {
      jinja_status = parsed.status();
    }
    if (builtin) {
      AIR_WARN(
          "{}/tokenizer_config.json: chat_template could not be rendered ({}); using the "
          "built-in {} format it resembles",
          tokenizer.origin(), jinja_status.message(),
          builtin->family_ == Family::kLlama3 ? "Llama 3" : "ChatML");
      return *builtin;
    }
    return InvalidArgument(fmt::format(
        "{}/tokenizer_config.json: chat_template could not be rendered ({}), and it is neither "
        "a Llama 3 template (<|start_header_id|>) nor a ChatML one (<|im_start|>), the formats "
        "air also renders without it",
        tokenizer.origin(), jinja_status.message()));
  }
  if (tokenizer.TokenToId("<|start_header_id|>")) return ChatTemplate(Family::kLlama3, bos, "");
  if (tokenizer.TokenToId("<|im_start|>")) return ChatTemplate(Family::kChatMl, "", "");
  return InvalidArgument(fmt::format(
      "{}: the tokenizer has no chat_template (tokenizer_config.json) and no Llama 3 or ChatML "
      "special tokens, so chat records cannot be rendered; use alpaca records "
      "(instruction/input/output) or a tokenizer with a chat template",
      tokenizer.origin()));
}

Result<std::string> ChatTemplate::RenderChecked(const std::vector<ChatMessage>& messages,
                                                bool add_generation_prompt) const {
  if (!jinja_) return RenderBuiltin(messages, add_generation_prompt);
  AIR_ASSIGN_OR_RETURN(jinja::RenderedTemplate rendered,
                       RenderJinja(messages, add_generation_prompt));
  return std::move(rendered.text);
}

Result<jinja::RenderedTemplate> ChatTemplate::RenderJinja(const std::vector<ChatMessage>& messages,
                                                          bool add_generation_prompt) const {
  nlohmann::json context = special_tokens_;
  nlohmann::json list = nlohmann::json::array();
  for (const ChatMessage& m : messages) {
    nlohmann::json message = m.fields.is_object() ? m.fields : nlohmann::json::object();
    message["role"] = m.role;
    message["content"] = m.content;
    // As transformers does: reasoning under any of its names is also "thinking" and
    // "reasoning_content".
    for (const char* name : {"reasoning_content", "thinking", "reasoning"}) {
      if (message.contains(name) && !message[name].is_null()) {
        nlohmann::json reasoning = message[name];
        if (!message.contains("thinking")) message["thinking"] = reasoning;
        message["reasoning_content"] = reasoning;
        break;
      }
    }
    list.push_back(std::move(message));
  }
  context["messages"] = std::move(list);
  context["add_generation_prompt"] = add_generation_prompt;
  context["tools"] = nullptr;
  context["documents"] = nullptr;
  auto rendered = jinja_->RenderWithGenerationSpans(context);
  if (!rendered.ok()) return rendered.status().WithContext("chat_template");
  return rendered;
}

std::string ChatTemplate::RenderText(const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt) const {
  auto text = RenderChecked(messages, add_generation_prompt);
  if (text.ok()) return *text;
  return has_builtin_ ? RenderBuiltin(messages, add_generation_prompt) : "";
}

std::string ChatTemplate::RenderBuiltin(const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt) const {
  std::string out;
  if (family_ == Family::kLlama3) {
    for (size_t i = 0; i < messages.size(); ++i) {
      if (i == 0) out += bos_token_;
      out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" +
             PyStrip(messages[i].content) + "<|eot_id|>";
    }
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0 && messages[0].role != "system" && !default_system_.empty()) {
      out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
    }
    out += "<|im_start|>" + messages[i].role + "\n" + messages[i].content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

Result<RenderedChat> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                          bool add_generation_prompt) const {
  if (messages.empty()) return InvalidArgument("a conversation needs at least one message");
  RenderedChat rendered;
  if (jinja_ && (jinja_->has_generation_blocks() || harmony_)) {
    AIR_ASSIGN_OR_RETURN(jinja::RenderedTemplate out, RenderJinja(messages, add_generation_prompt));
    rendered.text = std::move(out.text);
    if (jinja_->has_generation_blocks()) {
      for (const auto& span : out.generation_spans) {
        if (span.second > span.first) rendered.assistant_spans.push_back(span);
      }
    } else {
      rendered.assistant_spans = HarmonyAssistantSpans(rendered.text);
    }
    return rendered;
  }
  AIR_ASSIGN_OR_RETURN(rendered.text, RenderChecked(messages, add_generation_prompt));
  std::vector<ChatMessage> prefix;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == "assistant") {
      AIR_ASSIGN_OR_RETURN(std::string before,
                           RenderChecked(prefix, /*add_generation_prompt=*/true));
      prefix.push_back(messages[i]);
      AIR_ASSIGN_OR_RETURN(std::string through, RenderChecked(prefix, false));
      if (!through.starts_with(before) || !rendered.text.starts_with(through)) {
        return InvalidArgument(fmt::format(
            "messages[{}]: the chat template does not render this conversation's prefixes "
            "consistently (an assistant message opening the conversation, or a template that "
            "rewrites earlier turns), so the assistant's part cannot be located",
            i));
      }
      size_t end = through.size();
      while (end > before.size() && (through[end - 1] == '\n' || through[end - 1] == ' ')) --end;
      rendered.assistant_spans.emplace_back(before.size(), end);
    } else {
      prefix.push_back(messages[i]);
    }
  }
  return rendered;
}

}  // namespace air::engine
