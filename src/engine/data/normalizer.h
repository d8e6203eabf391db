// Normalizer: the tokenizer.json `normalizer` step. Byte-level BPE tokenizers use none
// (Llama 3: null) or Unicode NFC (Qwen2). NFC comes from ICU (libicu, a maintained Debian
// package), working directly on UTF-8; text whose code points are all below U+0300 is already
// NFC and is returned unchanged without calling ICU. Apply() can also report, for every byte of
// the normalized text, where it came from in the input, so token offsets can point back into
// the caller's text. Any other normalizer type is rejected when the tokenizer loads, naming it.
// Thread safety: immutable after construction; Apply() is safe from several threads.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace air::engine {

class Normalizer {
 public:
  enum class Kind { kNone, kNfc };

  Normalizer() = default;
  explicit Normalizer(Kind kind) : kind_(kind) {}

  // From the tokenizer.json `normalizer` value: null, {"type":"NFC"}, or a Sequence holding
  // only those. `where` prefixes error messages (e.g. "/path/tokenizer.json: normalizer").
  static Result<Normalizer> FromJson(const nlohmann::json& json, const std::string& where);

  Kind kind() const { return kind_; }

  // The normalized text. When `alignment` is non-null it receives out.size() + 1 entries:
  // alignment[k] is the input offset of normalized byte k (alignment[out.size()] = input size).
  Result<std::string> Apply(std::string_view text, std::vector<size_t>* alignment) const;

 private:
  Kind kind_ = Kind::kNone;
};

}  // namespace air::engine
