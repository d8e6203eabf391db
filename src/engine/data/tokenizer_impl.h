// Private to the tokenizer: the parts a loaded Tokenizer is made of, shared by tokenizer.cc
// (encode/decode) and tokenizer_load.cc (reading tokenizer.json and tokenizer_config.json).
// Not for use outside src/engine/data. Thread safety: immutable once built.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/data/added_tokens.h"
#include "engine/data/bpe_model.h"
#include "engine/data/normalizer.h"
#include "engine/data/pre_tokenizer.h"
#include "engine/data/tokenizer.h"

namespace air::engine {

// One item of a TemplateProcessing "single" template: fixed ids, or the encoded text itself.
struct TemplateItem {
  bool is_sequence = false;
  std::vector<int32_t> ids;  // when !is_sequence
};

struct Tokenizer::Impl {
  std::string origin;
  Normalizer normalizer;
  std::optional<PreTokenizer> pre_tokenizer;
  std::optional<BpeModel> model;
  AddedVocabulary added;
  // Post-processor: empty when it adds nothing (null, ByteLevel).
  std::vector<TemplateItem> single_template;
  std::optional<SpecialToken> bos, eos, pad;
  std::string chat_template;
  int32_t id_limit = 0;

  // Appends the BPE tokens of text[begin, end) (normalized text, no added tokens), with byte
  // ranges in the normalized text.
  Status EncodeText(std::string_view text, std::vector<TokenSpan>* out) const;
};

}  // namespace air::engine
