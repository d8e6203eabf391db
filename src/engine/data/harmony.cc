// Harmony message parsing and assistant spans (see harmony.h).
#include "engine/data/harmony.h"

#include <array>

namespace air::engine {

namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::array<std::string_view, 3> kEnds = {"<|end|>", "<|return|>", "<|call|>"};

// The first end token at or after `from`: its position and length (npos when none).
std::pair<size_t, size_t> FindEnd(std::string_view text, size_t from) {
  std::pair<size_t, size_t> best{std::string_view::npos, 0};
  for (std::string_view end : kEnds) {
    const size_t at = text.find(end, from);
    if (at < best.first) best = {at, end.size()};
  }
  return best;
}

}  // namespace

bool IsHarmonyTemplate(std::string_view source) {
  return source.find(kStart) != std::string_view::npos &&
         source.find(kChannel) != std::string_view::npos &&
         source.find(kMessage) != std::string_view::npos;
}

std::vector<HarmonyMessage> ParseHarmonyMessages(std::string_view text) {
  std::vector<HarmonyMessage> messages;
  size_t pos = text.find(kStart);
  while (pos != std::string_view::npos) {
    const size_t header_begin = pos + kStart.size();
    const size_t message = text.find(kMessage, header_begin);
    const size_t next_start = text.find(kStart, header_begin);
    if (message == std::string_view::npos || next_start < message) {  // a bare header
      pos = next_start;
      continue;
    }
    const auto [end, end_size] = FindEnd(text, message + kMessage.size());
    if (end == std::string_view::npos) break;  // unterminated: not a message
    HarmonyMessage m;
    m.begin = pos;
    m.end = end + end_size;
    std::string_view header = text.substr(header_begin, message - header_begin);
    const size_t channel = header.find(kChannel);
    std::string_view author = header.substr(0, channel);
    author = author.substr(0, author.find(' '));  // "assistant to=functions.x" -> "assistant"
    m.author = std::string(author);
    if (channel != std::string_view::npos) {
      std::string_view name = header.substr(channel + kChannel.size());
      m.channel = std::string(name.substr(0, name.find(' ')));  // "commentary json"
    }
    messages.push_back(std::move(m));
    pos = text.find(kStart, end + end_size);
  }
  return messages;
}

std::vector<std::pair<size_t, size_t>> HarmonyAssistantSpans(std::string_view text) {
  std::vector<std::pair<size_t, size_t>> spans;
  for (const HarmonyMessage& m : ParseHarmonyMessages(text)) {
    if (m.author != "assistant") continue;
    if (!spans.empty() && spans.back().second == m.begin) {
      spans.back().second = m.end;
    } else {
      spans.emplace_back(m.begin, m.end);
    }
  }
  return spans;
}

}  // namespace air::engine
