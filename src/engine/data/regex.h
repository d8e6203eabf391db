// Regex: a compiled PCRE2 pattern (UTF + UCP, JIT when available) for the tokenizer's
// pre-tokenizer splits, with the Oniguruma flavour Hugging Face `tokenizers` uses.
//
// Patterns in tokenizer.json files (Llama 3, Qwen2, GPT-2) are written for Oniguruma. Both
// engines agree on \p{L}, \p{N}, (?i:...) and lookaheads; they disagree on \s: PCRE2 counts
// U+180E MONGOLIAN VOWEL SEPARATOR as white space, Oniguruma (and Unicode since 6.3) does not.
// Compile() therefore rewrites \s and \S to explicit classes over the Unicode White_Space
// property before compiling. FindAll() returns every non-overlapping match left to right.
// Thread safety: immutable after Compile(); FindAll() may be called from several threads (each
// call uses its own match data). Cheap to copy (the compiled code is shared).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace air::engine {

class Regex {
 public:
  // Compiles `pattern`. `where` names the pattern's origin for error messages
  // (e.g. "tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex").
  static Result<Regex> Compile(std::string_view pattern, const std::string& where);

  // Byte ranges [begin, end) of all non-overlapping matches in `subject` (valid UTF-8). Empty
  // matches are returned too; the scan then moves on by one code point.
  Result<std::vector<std::pair<size_t, size_t>>> FindAll(std::string_view subject) const;

  // Whether the pattern matches somewhere in `subject`.
  Result<bool> Search(std::string_view subject) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  Regex(std::shared_ptr<const Code> code, std::string pattern)
      : code_(std::move(code)), pattern_(std::move(pattern)) {}

  std::shared_ptr<const Code> code_;
  std::string pattern_;
};

// The pattern rewritten so that \s and \S mean Unicode White_Space (as Oniguruma does); other
// text is copied unchanged. \S inside a character class cannot be expressed and is an error.
Result<std::string> RewriteWhitespaceClasses(std::string_view pattern);

}  // namespace air::engine
