// PreTokenizer: the tokenizer.json `pre_tokenizer` step of a byte-level BPE tokenizer. It cuts
// a (normalized) text into pieces that BPE then encodes one by one; merges never cross pieces.
//
// Supported, as Llama 3, Qwen2 and GPT-2 write them:
//   Sequence[Split{pattern:{Regex:...}, behavior:Isolated|Removed, invert:false},
//            ByteLevel{add_prefix_space, use_regex:false}]       (Llama 3, Qwen2)
//   ByteLevel{add_prefix_space, use_regex:true}                  (GPT-2: its own regex)
// A Split with a {String:...} pattern matches that literal text. The byte-level mapping itself
// is applied later by the tokenizer (each piece's bytes become GPT-2 alphabet code points).
// Anything else (another type, a Split after ByteLevel, invert:true, other behaviors) is
// rejected at load time with the JSON path of the offending step.
// Thread safety: immutable after FromJson(); Split() is safe from several threads.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/data/regex.h"

namespace air::engine {

// The regex GPT-2's ByteLevel pre-tokenizer uses when use_regex is true.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A piece of the input: bytes [begin, end), preceded by a virtual space when
// `prefix_space` is set (ByteLevel add_prefix_space).
struct PreTokenPiece {
  size_t begin = 0;
  size_t end = 0;
  bool prefix_space = false;
};

class PreTokenizer {
 public:
  // From the tokenizer.json `pre_tokenizer` value. `where` prefixes error messages.
  static Result<PreTokenizer> FromJson(const nlohmann::json& json, const std::string& where);

  // Cuts `text` (valid UTF-8) into pieces, in order; pieces cover the text except where a
  // Split with behavior Removed drops its matches.
  Result<std::vector<PreTokenPiece>> Split(std::string_view text) const;

 private:
  struct Step {
    enum class Kind { kSplitIsolated, kSplitRemoved, kByteLevel } kind;
    Regex regex;                    // for the split steps, and ByteLevel with use_regex
    bool use_regex = false;         // ByteLevel only
    bool add_prefix_space = false;  // ByteLevel only
  };

  static Status AddSteps(const nlohmann::json& json, const std::string& where,
                         std::vector<Step>* steps, bool* seen_byte_level);

  std::vector<Step> steps_;
};

}  // namespace air::engine
