// BpeModel: the tokenizer.json `model` of type BPE — vocabulary, merge ranks, and the merge
// loop that turns one pre-token (in the byte-level alphabet) into token ids.
//
// Merges come as "a b" strings or as ["a", "b"] pairs (both forms exist in the wild); a merge's
// rank is its index, and the merged token must be in the vocabulary. Encoding a word starts from
// its code points and repeatedly applies the lowest-ranked adjacent merge (leftmost on ties), as
// Hugging Face `tokenizers` does; with ignore_merges (Llama 3) a word that is itself in the
// vocabulary becomes that one token. A code point missing from the vocabulary becomes unk_token
// when the model has one and is dropped otherwise (the library's behaviour). Results are cached
// per word (bounded; cleared when full).
// Thread safety: Tokenize() may be called from several threads; the cache is mutex-guarded.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace air::engine {

class BpeModel {
 public:
  // From the tokenizer.json `model` object. `where` prefixes error messages.
  static Result<BpeModel> FromJson(const nlohmann::json& json, const std::string& where);

  // A model from a vocabulary and merges (pairs of tokens), for tests and tools.
  static Result<BpeModel> FromParts(std::unordered_map<std::string, int32_t> vocab,
                                    const std::vector<std::pair<std::string, std::string>>& merges,
                                    bool ignore_merges, std::optional<std::string> unk_token);

  BpeModel(BpeModel&&) noexcept = default;
  BpeModel& operator=(BpeModel&&) noexcept = default;

  // One token of a word: its id and the code points [begin, end) of the word it covers.
  struct Piece {
    int32_t id;
    uint32_t begin;
    uint32_t end;
  };

  // Appends the tokens of `word` (byte-level alphabet text, valid UTF-8) to `out`.
  void Tokenize(std::string_view word, std::vector<Piece>* out) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The token text of `id`, or nullptr when the model has no such id.
  const std::string* IdToToken(int32_t id) const;
  // One past the largest id of the vocabulary.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }
  size_t vocab_size() const { return vocab_.size(); }
  size_t merge_count() const { return merges_.size(); }

 private:
  struct MergeRule {
    int32_t rank;
    int32_t merged_id;
  };
  struct Cache {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<Piece>> words;
  };
  static constexpr size_t kMaxCachedWords = 100000;
  static constexpr size_t kMaxCachedWordBytes = 256;

  BpeModel() : cache_(std::make_unique<Cache>()) {}
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  Status AddMerge(const std::string& left, const std::string& right, const std::string& where);
  void MergeWord(std::string_view word, std::vector<Piece>* out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;  // "" for ids the vocabulary skips
  std::vector<bool> has_id_;
  std::unordered_map<uint64_t, MergeRule> merges_;
  bool ignore_merges_ = false;
  std::optional<int32_t> unk_id_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace air::engine
