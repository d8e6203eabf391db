// Tokenizer: a Hugging Face tokenizer.json byte-level BPE tokenizer (Llama 3, Qwen2, GPT-2
// style), encoding and decoding exactly as the `tokenizers` library does, plus what
// tokenizer_config.json adds (bos/eos/pad tokens and the chat template).
//
// Encode: added/special tokens are found first (added_tokens.h); the rest is normalized
// (normalizer.h), cut into pieces (pre_tokenizer.h), mapped to the GPT-2 byte alphabet and
// BPE-encoded (bpe_model.h); finally the post-processor may add tokens (Llama 3's
// TemplateProcessing puts <|begin_of_text|> first) when add_special_tokens is true.
// Decode: tokens are concatenated, mapped back to bytes (ByteLevel decoder) and turned into
// UTF-8, invalid bytes becoming U+FFFD.
//
// Load() takes a model directory (tokenizer.json, plus tokenizer_config.json and
// chat_template.jinja when present) or a tokenizer.json path. Every unsupported setting is an error
// naming the file and JSON path. Thread safety: immutable after loading (apart from an internal,
// locked BPE cache): Encode() and Decode() may be called from several threads. Move-only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "engine/data/added_tokens.h"

namespace air::engine {

// A token id with the byte range [begin, end) of the input it came from. Tokens inserted by the
// post-processor (e.g. BOS) have begin == end == 0.
struct TokenSpan {
  int32_t id = 0;
  uint32_t begin = 0;
  uint32_t end = 0;
};

// A named special token from tokenizer_config.json (or the tokenizer.json post-processor).
struct SpecialToken {
  std::string content;
  int32_t id = -1;
};

class Tokenizer {
 public:
  // `path` is a directory holding tokenizer.json (and optionally tokenizer_config.json), or a
  // tokenizer.json file (tokenizer_config.json is then looked for beside it).
  static Result<Tokenizer> Load(const std::string& path, Env* env);

  // The files' contents. Empty strings stand for absent files (tokenizer_config.json and
  // chat_template.jinja are optional; the latter, written by newer transformers, overrides the
  // config's chat_template). `origin` names the directory or file in error messages.
  struct Files {
    std::string tokenizer_json;
    std::string config_json;
    std::string chat_template_jinja;
    std::string origin;
  };
  static Result<Tokenizer> FromFiles(const Files& files);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text` (valid UTF-8; otherwise an error naming the byte offset).
  Result<std::vector<int32_t>> Encode(std::string_view text, bool add_special_tokens = true) const;
  // The same, with each token's byte range in `text`.
  Result<std::vector<TokenSpan>> EncodeWithOffsets(std::string_view text,
                                                   bool add_special_tokens = true) const;

  // Text of `ids`. Ids the tokenizer does not know are skipped (as the reference library does);
  // with skip_special_tokens, special added tokens are left out.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  std::optional<std::string> IdToToken(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  // One past the largest id (BPE vocabulary and added tokens together): the embedding rows a
  // model needs at least.
  int32_t id_limit() const;

  const std::optional<SpecialToken>& bos() const;
  const std::optional<SpecialToken>& eos() const;
  const std::optional<SpecialToken>& pad() const;
  // The id to fill padding with in input_ids: pad, else eos, else 0. (Padding never reaches the
  // loss; labels are -100 there.)
  int32_t padding_id() const;
  // The Jinja chat_template from tokenizer_config.json ("" if none).
  const std::string& chat_template() const;
  const AddedVocabulary& added_vocabulary() const;
  // Where it was loaded from, for messages.
  const std::string& origin() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace air::engine
