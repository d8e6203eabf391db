// JSON helpers for the data pipeline: parsing text with errors that say FILE:LINE:COL, and
// mapping byte offsets to line and column.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace air::engine {

// 1-based line and column (in bytes) of `offset` in `text`.
struct LineColumn {
  size_t line = 1;
  size_t column = 1;
};
LineColumn LineColumnAt(std::string_view text, size_t offset);

// Parses `text`; on failure the error reads "<origin>:LINE:COL: invalid JSON: <reason>".
// `line_offset` is added to reported lines (for text that is one line of a larger file).
Result<nlohmann::json> ParseJson(std::string_view text, const std::string& origin,
                                 size_t line_offset = 0);

// A short, printable excerpt of `text` for error messages (at most `max_chars` bytes, cut at a
// UTF-8 boundary, with "..." when shortened).
std::string Excerpt(std::string_view text, size_t max_chars = 60);

}  // namespace air::engine
