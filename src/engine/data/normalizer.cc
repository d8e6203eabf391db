// Tokenizer normalizer: none or NFC through ICU (see normalizer.h).
#include "engine/data/normalizer.h"

#include <fmt/format.h>
#include <unicode/bytestream.h>
#include <unicode/edits.h>
#include <unicode/normalizer2.h>

namespace air::engine {
namespace {

// Code points below U+0300 are NFC and never combine with each other: a UTF-8 text whose bytes
// are all below 0xCC (the lead byte of U+0300) needs no work.
bool TriviallyNfc(std::string_view text) {
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0xCC) return false;
  }
  return true;
}

void IdentityAlignment(size_t size, std::vector<size_t>* alignment) {
  alignment->resize(size + 1);
  for (size_t i = 0; i <= size; ++i) (*alignment)[i] = i;
}

}  // namespace

Result<Normalizer> Normalizer::FromJson(const nlohmann::json& json, const std::string& where) {
  if (json.is_null()) return Normalizer(Kind::kNone);
  if (!json.is_object() || !json.contains("type") || !json["type"].is_string()) {
    return InvalidArgument(where + ": expected null or an object with a string \"type\"");
  }
  std::string type = json["type"];
  if (type == "NFC") return Normalizer(Kind::kNfc);
  if (type == "Sequence") {
    Kind kind = Kind::kNone;
    const auto& steps = json.value("normalizers", nlohmann::json::array());
    for (size_t i = 0; i < steps.size(); ++i) {
      AIR_ASSIGN_OR_RETURN(Normalizer step,
                           FromJson(steps[i], fmt::format("{}.normalizers[{}]", where, i)));
      if (step.kind() == Kind::kNfc) kind = Kind::kNfc;
    }
    return Normalizer(kind);
  }
  return InvalidArgument(fmt::format(
      "{}: normalizer type \"{}\" is not supported; byte-level BPE tokenizers use null or NFC",
      where, type));
}

Result<std::string> Normalizer::Apply(std::string_view text, std::vector<size_t>* alignment) const {
  if (kind_ == Kind::kNone || TriviallyNfc(text)) {
    if (alignment != nullptr) IdentityAlignment(text.size(), alignment);
    return std::string(text);
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) {
    return Internal(fmt::format("ICU NFC normalizer unavailable: {}", u_errorName(status)));
  }
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  icu::Edits edits;
  nfc->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink,
                     alignment != nullptr ? &edits : nullptr, status);
  if (U_FAILURE(status)) {
    return InvalidArgument(fmt::format("NFC normalization failed ({}); is the text valid UTF-8?",
                                       u_errorName(status)));
  }
  if (alignment != nullptr) {
    alignment->clear();
    alignment->reserve(out.size() + 1);
    icu::Edits::Iterator it = edits.getFineIterator();
    while (it.next(status)) {
      auto src = static_cast<size_t>(it.sourceIndex());
      auto old_len = static_cast<size_t>(it.oldLength());
      auto new_len = static_cast<size_t>(it.newLength());
      for (size_t k = 0; k < new_len; ++k) {
        // Unchanged spans map byte for byte; a changed span maps to where it began.
        alignment->push_back(it.hasChange() ? src : src + std::min(k, old_len));
      }
    }
    if (U_FAILURE(status) || alignment->size() != out.size()) {
      return Internal("NFC normalization produced an inconsistent offset map");
    }
    alignment->push_back(text.size());
  }
  return out;
}

}  // namespace air::engine
