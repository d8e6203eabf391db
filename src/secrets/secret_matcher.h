// SecretMatcher: an Aho–Corasick automaton over the bytes of a set of secret values, built once
// per run and shared (read-only) by every Redactor of that run (docs/secrets.md, redaction).
//
// For each automaton state it precomputes the length of the longest value ending there (0 when
// none) and how many trailing bytes could still begin a value, which is what lets a streaming
// Redactor emit everything else at once. Small value sets get a dense transition table
// (one lookup per byte); large ones fall back to sparse edges with failure links, so memory
// stays proportional to the total length of the values.
// Values shorter than kMinRedactedLength bytes are not matched (docs/secrets.md: redacting
// one- to three-byte values would garble logs and reveal the value through where the markers
// appear); empty and duplicate values are ignored.
// Thread safety: immutable after Build(); share it freely.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace air::secrets {

inline constexpr size_t kMinRedactedLength = 4;

class SecretMatcher {
 public:
  static std::shared_ptr<const SecretMatcher> Build(const std::vector<std::string>& values,
                                                    size_t min_length = kMinRedactedLength);

  using State = uint32_t;
  static constexpr State kRoot = 0;

  State Next(State state, uint8_t byte) const {
    if (!dense_.empty()) return dense_[static_cast<size_t>(state) * 256 + byte];
    return SparseNext(state, byte);
  }
  // Length of the longest value that ends at this state (0 if none).
  uint32_t MatchLength(State state) const { return match_len_[state]; }
  // How many of the last bytes seen could still be the beginning of a value
  // (min(depth, longest value − 1)).
  uint32_t Pending(State state) const { return pending_[state]; }

  bool empty() const { return longest_ == 0; }
  size_t longest() const { return longest_; }
  size_t pattern_count() const { return pattern_count_; }
  // Distinct non-empty values that were ignored because they are shorter than the minimum.
  size_t short_values_ignored() const { return short_ignored_; }
  size_t state_count() const { return match_len_.size(); }

 private:
  SecretMatcher() = default;
  State SparseNext(State state, uint8_t byte) const;
  // Child of `state` on `byte` in the trie, or -1.
  int64_t Child(State state, uint8_t byte) const;

  // Trie edges: state s owns edge_byte_/edge_to_ in [edge_begin_[s], edge_begin_[s + 1]),
  // sorted by byte.
  std::vector<uint32_t> edge_begin_;
  std::vector<uint8_t> edge_byte_;
  std::vector<State> edge_to_;
  std::vector<State> fail_;
  std::vector<State> root_next_;  // 256 entries: the full transition row of the root
  std::vector<State> dense_;      // state * 256 + byte, when small enough
  std::vector<uint32_t> match_len_;
  std::vector<uint32_t> pending_;
  size_t longest_ = 0;
  size_t pattern_count_ = 0;
  size_t short_ignored_ = 0;
};

}  // namespace air::secrets
