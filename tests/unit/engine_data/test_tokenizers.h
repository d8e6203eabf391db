// Hand-made tokenizer.json files for the engine_data unit tests: a byte-level BPE whose vocabulary
// is the 256-symbol GPT-2 alphabet (token id = byte value) plus the merges a test asks for, with
// optional added tokens, normalizer and post-processor. Small enough to reason about by hand.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/data/tokenizer.h"
#include "engine/data/utf8.h"

namespace air::engine::testing {

// The Llama 3 pre-tokenizer regex.
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct TinyTokenizerSpec {
  // Merges as pairs of byte-level tokens, e.g. {"h", "e"}, {"he", "l"}; each merged token gets
  // the next id after 255 in order.
  std::vector<std::pair<std::string, std::string>> merges;
  nlohmann::json added_tokens = nlohmann::json::array();
  nlohmann::json normalizer = nullptr;
  nlohmann::json post_processor = nullptr;
  // Llama 3 style Split + ByteLevel(use_regex=false) by default.
  nlohmann::json pre_tokenizer = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern", {{"Regex", std::string(kLlama3Pattern)}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  bool ignore_merges = false;
  bool merges_as_strings = false;
};

inline nlohmann::json TinyTokenizerJson(const TinyTokenizerSpec& spec) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[std::string(ByteToUnicode(static_cast<uint8_t>(b)))] = b;
  nlohmann::json merges = nlohmann::json::array();
  int next = 256;
  for (const auto& [a, b] : spec.merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    if (spec.merges_as_strings) {
      merges.push_back(a + " " + b);
    } else {
      merges.push_back({a, b});
    }
  }
  return {{"version", "1.0"},
          {"added_tokens", spec.added_tokens},
          {"normalizer", spec.normalizer},
          {"pre_tokenizer", spec.pre_tokenizer},
          {"post_processor", spec.post_processor},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"unk_token", nullptr},
            {"ignore_merges", spec.ignore_merges},
            {"vocab", vocab},
            {"merges", merges}}}};
}

inline nlohmann::json Added(int id, const std::string& content, bool special = true) {
  return {{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", !special}, {"special", special}};
}

inline Result<Tokenizer> TinyTokenizer(const TinyTokenizerSpec& spec,
                                       const nlohmann::json& config = nullptr) {
  Tokenizer::Files files;
  files.tokenizer_json = TinyTokenizerJson(spec).dump();
  if (!config.is_null()) files.config_json = config.dump();
  files.origin = "/tiny";
  return Tokenizer::FromFiles(files);
}

}  // namespace air::engine::testing
