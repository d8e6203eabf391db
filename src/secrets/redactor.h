// Redactor: replaces every occurrence of any secret value in a byte stream with "[REDACTED]",
// even when a value is split across writes (docs/secrets.md, redaction).
//
// Feed() returns the part of the stream that is already safe to emit and holds back only the
// trailing bytes that could still be the beginning of a value: at most (longest value − 1)
// bytes, usually none. Flush() ends the stream and returns the rest. Occurrences that overlap
// (including a value that is a prefix or suffix of another, or of itself) merge into one
// "[REDACTED]"; adjacent ones give one marker each. Multi-line values are matched like any
// other bytes, so apply the redactor to the raw stream before splitting it into lines or
// adding timestamps. Values shorter than kMinRedactedLength bytes are not redacted
// (secret_matcher.h says why). Chunk boundaries never change the result:
// Feed(a) + Feed(b) + Flush() == RedactAll(a + b).
// Thread safety: one Redactor per stream, used by one thread at a time; the SecretMatcher it
// reads is immutable and may be shared by many Redactors.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "secrets/secret_matcher.h"

namespace air::secrets {

inline constexpr std::string_view kRedactedMarker = "[REDACTED]";

class Redactor {
 public:
  explicit Redactor(std::shared_ptr<const SecretMatcher> matcher);
  explicit Redactor(const std::vector<std::string>& values);

  // Consumes `chunk` and returns the output that can be emitted now.
  std::string Feed(std::string_view chunk);
  // Ends the stream: returns every held-back byte (redacted). The Redactor can then start a
  // new, independent stream.
  std::string Flush();

  // Bytes received but not yet emitted or redacted away.
  size_t held_back() const { return pending_.size(); }

 private:
  // A maximal run of bytes covered by overlapping occurrences, in absolute stream offsets.
  struct Region {
    uint64_t begin;
    uint64_t end;
    bool marker_emitted;  // its "[REDACTED]" is already out; it may still grow at the end
  };

  void AddOccurrence(uint64_t begin, uint64_t end);
  // Emits everything before absolute offset `limit` that is decided.
  void EmitUpTo(uint64_t limit, std::string& out);

  std::shared_ptr<const SecretMatcher> matcher_;
  SecretMatcher::State state_ = SecretMatcher::kRoot;
  uint64_t consumed_ = 0;       // bytes fed so far
  uint64_t pending_begin_ = 0;  // absolute offset of pending_[0]
  std::string pending_;         // undecided bytes [pending_begin_, consumed_)
  std::deque<Region> regions_;  // sorted, disjoint; only the first may have marker_emitted
};

// One-shot redaction of a whole string.
std::string RedactAll(const SecretMatcher& matcher, std::string_view text);
std::string RedactAll(const std::vector<std::string>& values, std::string_view text);

}  // namespace air::secrets
