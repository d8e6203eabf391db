// Added and special tokens: lookup and leftmost-longest matching (see added_tokens.h).
#include "engine/data/added_tokens.h"

#include <unicode/uchar.h>

#include "engine/data/utf8.h"

namespace air::engine {
namespace {

// Rust regex's Unicode \w: Alphabetic, marks, decimal digits, connector punctuation and the
// joiners (ZWNJ, ZWJ).
bool IsWordChar(char32_t cp) {
  auto c = static_cast<UChar32>(cp);
  if (u_isUAlphabetic(c)) return true;
  uint32_t mask = U_GET_GC_MASK(c);
  return (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0 || cp == 0x200C || cp == 0x200D;
}

bool IsWhiteSpace(char32_t cp) { return u_isUWhiteSpace(static_cast<UChar32>(cp)) != 0; }

// The code point that ends `text` (which is non-empty, valid UTF-8), and its byte length.
char32_t LastCodePoint(std::string_view text, size_t* length) {
  size_t start = text.size() - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return DecodeUtf8At(text, start, length);
}

// Start of the run of white space that ends `text` (text.size() if there is none).
size_t WhiteSpaceRunStart(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t len = 0;
    char32_t cp = LastCodePoint(text.substr(0, end), &len);
    if (!IsWhiteSpace(cp)) break;
    end -= len;
  }
  return end;
}

// Length of the run of white space that starts `text`.
size_t WhiteSpaceRunLength(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    char32_t cp = DecodeUtf8At(text, pos, &len);
    if (!IsWhiteSpace(cp)) break;
    pos += len;
  }
  return pos;
}

}  // namespace

void AddedVocabulary::Trie::Insert(std::string_view key, int32_t token_index) {
  if (nodes.empty()) nodes.emplace_back();
  int32_t node = 0;
  for (char c : key) {
    auto byte = static_cast<unsigned char>(c);
    auto it = nodes[node].children.find(byte);
    if (it == nodes[node].children.end()) {
      int32_t child = static_cast<int32_t>(nodes.size());
      nodes[node].children.emplace(byte, child);
      nodes.emplace_back();
      node = child;
    } else {
      node = it->second;
    }
  }
  nodes[node].terminal = token_index;
  first_bytes.set(static_cast<unsigned char>(key[0]));
}

size_t AddedVocabulary::Trie::LongestPrefix(std::string_view text, int32_t* token) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    auto it = nodes[node].children.find(static_cast<unsigned char>(text[i]));
    if (it == nodes[node].children.end()) break;
    node = it->second;
    if (nodes[node].terminal >= 0) {
      best = i + 1;
      *token = nodes[node].terminal;
    }
  }
  return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens,
                                 const std::vector<std::string>& normalized_contents)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    by_id_[t.id] = i;
    by_content_[t.content] = i;
    if (t.content.empty()) continue;
    if (t.normalized) {
      const std::string& key = i < normalized_contents.size() ? normalized_contents[i] : t.content;
      if (!key.empty()) tries_[1].Insert(key, static_cast<int32_t>(i));
    } else {
      tries_[0].Insert(t.content, static_cast<int32_t>(i));
    }
  }
}

std::vector<TextSegment> AddedVocabulary::FindMatches(std::string_view text,
                                                      bool normalized_set) const {
  std::vector<TextSegment> segments;
  const Trie& trie = tries_[normalized_set ? 1 : 0];
  size_t start_offset = 0;  // end of the last emitted segment
  size_t pos = 0;
  while (!trie.nodes.empty() && pos < text.size()) {
    if (!trie.first_bytes.test(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    int32_t index = -1;
    size_t len = trie.LongestPrefix(text.substr(pos), &index);
    if (len == 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;  // matches never overlap, even when this one is discarded below
    const AddedToken& token = tokens_[index];
    if (token.single_word) {
      size_t cp_len = 0;
      bool word_before = start > 0 && IsWordChar(LastCodePoint(text.substr(0, start), &cp_len));
      bool word_after = stop < text.size() && IsWordChar(DecodeUtf8At(text, stop, &cp_len));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) start = std::max(WhiteSpaceRunStart(text.substr(0, start)), start_offset);
    if (token.rstrip) stop += WhiteSpaceRunLength(text.substr(stop));
    pos = stop;
    if (start_offset < start) segments.push_back({start_offset, start, -1});
    segments.push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) segments.push_back({start_offset, text.size(), -1});
  return segments;
}

const AddedToken* AddedVocabulary::Find(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::FindByContent(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

bool AddedVocabulary::IsSpecial(int32_t id) const {
  const AddedToken* t = Find(id);
  return t != nullptr && t->special;
}

}  // namespace air::engine
