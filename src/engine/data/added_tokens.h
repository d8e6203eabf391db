// AddedVocabulary: the tokenizer.json `added_tokens` (special tokens such as <|begin_of_text|>
// and <|im_end|>, and any other tokens added on top of the BPE vocabulary), found in the text
// before BPE runs, so they are never split.
//
// Matching follows Hugging Face `tokenizers`: two sets — tokens with normalized=false (all
// special tokens, usually) are found in the raw text, the others in the normalized text;
// within a set the leftmost match wins and, at one position, the longest; matches never
// overlap. single_word drops a match that touches a word character (Unicode \w) on either side;
// lstrip / rstrip extend a match over the white space before / after it.
// Thread safety: immutable after construction; FindMatches() is safe from several threads.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace air::engine {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;  // matched against the normalized text (false for special tokens)
};

// A stretch of text: either an added token (added_id >= 0) or text for BPE (added_id == -1).
struct TextSegment {
  size_t begin = 0;
  size_t end = 0;
  int32_t added_id = -1;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;

  // `normalized_contents[i]` is tokens[i].content after the tokenizer's normalizer (only used for
  // tokens with normalized=true). Tokens with empty content are ignored.
  AddedVocabulary(std::vector<AddedToken> tokens,
                  const std::vector<std::string>& normalized_contents);

  // Segments covering `text` in order. `normalized_set` selects which tokens are looked for:
  // false -> the normalized=false ones (run on raw text), true -> the normalized=true ones.
  std::vector<TextSegment> FindMatches(std::string_view text, bool normalized_set) const;

  const AddedToken* Find(int32_t id) const;
  const AddedToken* FindByContent(std::string_view content) const;
  bool IsSpecial(int32_t id) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }
  bool has_normalized_tokens() const { return !tries_[1].nodes.empty(); }

 private:
  // A byte trie over token contents; terminal[node] is an index into tokens_ or -1.
  struct Trie {
    struct Node {
      std::unordered_map<unsigned char, int32_t> children;
      int32_t terminal = -1;
    };
    std::vector<Node> nodes;
    std::bitset<256> first_bytes;
    void Insert(std::string_view key, int32_t token_index);
    // Length of the longest key that prefixes `text` (0 if none); its token index in *token.
    size_t LongestPrefix(std::string_view text, int32_t* token) const;
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  Trie tries_[2];  // [0] normalized=false tokens, [1] normalized=true tokens
};

}  // namespace air::engine
