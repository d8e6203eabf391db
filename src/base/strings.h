// Small string utilities shared by the spec, the CLI and the engine's config readers:
// did-you-mean suggestions, splitting, trimming, joining, and sizes (human-readable, parsed).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace air {

// Levenshtein distance between a and b.
size_t EditDistance(std::string_view a, std::string_view b);

// The closest candidate to `word` if it is near enough to be a likely typo (distance at most
// max(2, len/3)), else "". Ties go to the first candidate.
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" when nothing is close.
std::string DidYouMeanSuffix(std::string_view word, const std::vector<std::string>& candidates);

std::vector<std::string> Split(std::string_view s, char sep);
std::string_view Trim(std::string_view s);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
bool StartsWith(std::string_view s, std::string_view prefix);
bool EndsWith(std::string_view s, std::string_view suffix);

// 1536 -> "1.5 KiB".
std::string HumanBytes(uint64_t bytes);

// "1000000", "500MB", "2GB", "1TB" (powers of 1000, as transformers' max_shard_size), "64KiB",
// "1GiB", "2TiB" (powers of 1024) -> bytes. kInvalidArgument ("'x' is not a size; use ...") for
// anything else, including a size past 2^64.
Result<uint64_t> ParseByteSize(std::string_view text);

// True when `s` is valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF). On failure and
// when `bad_offset` is given, it receives the byte offset of the first invalid sequence.
bool IsValidUtf8(std::string_view s, size_t* bad_offset = nullptr);

}  // namespace air
