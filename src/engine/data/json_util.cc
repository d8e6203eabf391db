// JSON parsing with file:line:col errors (see json_util.h).
#include "engine/data/json_util.h"

#include <fmt/format.h>

namespace air::engine {

LineColumn LineColumnAt(std::string_view text, size_t offset) {
  LineColumn lc;
  offset = std::min(offset, text.size());
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++lc.line;
      lc.column = 1;
    } else {
      ++lc.column;
    }
  }
  return lc;
}

Result<nlohmann::json> ParseJson(std::string_view text, const std::string& origin,
                                 size_t line_offset) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    LineColumn lc = LineColumnAt(text, offset);
    std::string reason = e.what();
    // nlohmann's text starts with "[json.exception.parse_error.101] parse error at line 1,
    // column 2: "; keep only what follows.
    size_t colon = reason.find(": ");
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
    return InvalidArgument(fmt::format("{}:{}:{}: invalid JSON: {}", origin, lc.line + line_offset,
                                       lc.column, reason));
  }
}

std::string Excerpt(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

}  // namespace air::engine
