// The Jinja lexer (see jinja.h): template source -> segments (text, {{ }} and {% %} tags) with
// jinja2's white space handling as transformers configures it (trim_blocks, lstrip_blocks), and
// the tokens inside one tag. Internal to src/engine/data.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/data/jinja_value.h"

namespace air::engine::jinja {

struct Segment {
  enum class Kind { kText, kOutput, kStatement } kind;
  std::string text;  // the text, or the inside of the tag (without delimiters and -/+)
  int line;
};

// Splits a template into segments. A newline right after a block or comment tag is dropped,
// spaces and tabs before a block tag at the start of a line are dropped, "-" strips all white
// space on its side, "+" turns lstrip/trim off for that tag.
Result<std::vector<Segment>> Lex(std::string_view src);

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd } kind;
  std::string text;
  Value literal;
};

// The tokens of one tag's inside, ending with a kEnd token. `line` is for messages.
Result<std::vector<Token>> Tokenize(const std::string& s, int line);

}  // namespace air::engine::jinja
