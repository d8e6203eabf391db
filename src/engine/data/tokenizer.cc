// Tokenizer encode and decode (see tokenizer.h); loading lives in tokenizer_load.cc.
#include "engine/data/tokenizer.h"

#include <fmt/format.h>

#include "base/strings.h"
#include "engine/data/tokenizer_impl.h"
#include "engine/data/utf8.h"

namespace air::engine {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Status Tokenizer::Impl::EncodeText(std::string_view text, std::vector<TokenSpan>* out) const {
  AIR_ASSIGN_OR_RETURN(auto pieces, pre_tokenizer->Split(text));
  std::string word;
  std::vector<BpeModel::Piece> bpe;
  for (const PreTokenPiece& piece : pieces) {
    word.clear();
    if (piece.prefix_space) word.append(ByteToUnicode(' '));
    AppendByteLevel(text.substr(piece.begin, piece.end - piece.begin), &word);
    bpe.clear();
    model->Tokenize(word, &bpe);
    // Code point c of the byte-level word is input byte piece.begin + c (minus the virtual
    // space, which has no input byte).
    uint32_t shift = piece.prefix_space ? 1 : 0;
    auto to_byte = [&](uint32_t c) {
      return static_cast<uint32_t>(piece.begin) + (c > shift ? c - shift : 0);
    };
    for (const auto& p : bpe) out->push_back({p.id, to_byte(p.begin), to_byte(p.end)});
  }
  return Status::Ok();
}

Result<std::vector<TokenSpan>> Tokenizer::EncodeWithOffsets(std::string_view text,
                                                            bool add_special_tokens) const {
  size_t bad_offset = 0;
  if (!IsValidUtf8(text, &bad_offset)) {
    return InvalidArgument(
        fmt::format("text to tokenize is not valid UTF-8 (at byte {})", bad_offset));
  }
  if (text.size() > UINT32_MAX) return InvalidArgument("text to tokenize is larger than 4 GiB");
  const Impl& m = *impl_;
  std::vector<TokenSpan> encoded;
  std::vector<size_t> alignment;
  std::vector<TokenSpan> local;
  for (const TextSegment& raw : m.added.FindMatches(text, /*normalized_set=*/false)) {
    if (raw.added_id >= 0) {
      encoded.push_back(
          {raw.added_id, static_cast<uint32_t>(raw.begin), static_cast<uint32_t>(raw.end)});
      continue;
    }
    std::string_view segment = text.substr(raw.begin, raw.end - raw.begin);
    AIR_ASSIGN_OR_RETURN(std::string normalized, m.normalizer.Apply(segment, &alignment));
    std::vector<TextSegment> parts;
    if (m.added.has_normalized_tokens()) {
      parts = m.added.FindMatches(normalized, /*normalized_set=*/true);
    } else if (!normalized.empty()) {
      parts.push_back({0, normalized.size(), -1});
    }
    for (const TextSegment& part : parts) {
      local.clear();
      if (part.added_id >= 0) {
        local.push_back({part.added_id, 0, static_cast<uint32_t>(part.end - part.begin)});
      } else {
        AIR_RETURN_IF_ERROR(m.EncodeText(
            std::string_view(normalized).substr(part.begin, part.end - part.begin), &local));
      }
      // Normalized offsets -> offsets in `text`.
      for (TokenSpan& t : local) {
        t.begin = static_cast<uint32_t>(raw.begin + alignment[part.begin + t.begin]);
        t.end = static_cast<uint32_t>(raw.begin + alignment[part.begin + t.end]);
        encoded.push_back(t);
      }
    }
  }
  if (!add_special_tokens || m.single_template.empty()) return encoded;
  std::vector<TokenSpan> processed;
  processed.reserve(encoded.size() + 4);
  for (const TemplateItem& item : m.single_template) {
    if (item.is_sequence) {
      processed.insert(processed.end(), encoded.begin(), encoded.end());
    } else {
      for (int32_t id : item.ids) processed.push_back({id, 0, 0});
    }
  }
  return processed;
}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                               bool add_special_tokens) const {
  AIR_ASSIGN_OR_RETURN(auto spans, EncodeWithOffsets(text, add_special_tokens));
  std::vector<int32_t> ids;
  ids.reserve(spans.size());
  for (const auto& s : spans) ids.push_back(s.id);
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    const std::string* token = nullptr;
    if (const AddedToken* added = impl_->added.Find(id)) {
      if (skip_special_tokens && added->special) continue;
      token = &added->content;
    } else {
      token = impl_->model->IdToToken(id);
      if (token == nullptr) continue;
    }
    // ByteLevel decoder: a token made only of alphabet code points becomes those bytes; any
    // other token (e.g. an added token with a plain space) is taken as its own UTF-8 text.
    if (!ByteLevelToBytes(*token, &bytes)) bytes.append(*token);
  }
  return Utf8Lossy(bytes);
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (const AddedToken* added = impl_->added.FindByContent(token)) return added->id;
  return impl_->model->TokenToId(token);
}

std::optional<std::string> Tokenizer::IdToToken(int32_t id) const {
  if (const AddedToken* added = impl_->added.Find(id)) return added->content;
  if (const std::string* token = impl_->model->IdToToken(id)) return *token;
  return std::nullopt;
}

bool Tokenizer::IsSpecial(int32_t id) const { return impl_->added.IsSpecial(id); }
int32_t Tokenizer::id_limit() const { return impl_->id_limit; }
const std::optional<SpecialToken>& Tokenizer::bos() const { return impl_->bos; }
const std::optional<SpecialToken>& Tokenizer::eos() const { return impl_->eos; }
const std::optional<SpecialToken>& Tokenizer::pad() const { return impl_->pad; }
int32_t Tokenizer::padding_id() const {
  if (impl_->pad) return impl_->pad->id;
  if (impl_->eos) return impl_->eos->id;
  return 0;
}
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
const AddedVocabulary& Tokenizer::added_vocabulary() const { return impl_->added; }
const std::string& Tokenizer::origin() const { return impl_->origin; }

}  // namespace air::engine
