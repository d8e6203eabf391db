// Tests for the streaming Redactor: specific cases, a fuzz test against a naive reference over
// random values and random chunkings (dense and sparse automata), the hold-back bound, and a
// large log in small writes (its speed: bench/redact).
#include "secrets/redactor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace air::secrets {
namespace {

// The reference: find every occurrence of every value (length >= min_length) by brute force,
// merge occurrences that overlap (not those that only touch), replace each merged run.
std::string NaiveRedact(const std::vector<std::string>& values, std::string_view text,
                        size_t min_length) {
  std::vector<std::pair<size_t, size_t>> spans;
  for (const auto& v : values) {
    if (v.empty() || v.size() < min_length) continue;
    for (size_t at = text.find(v); at != std::string_view::npos; at = text.find(v, at + 1)) {
      spans.emplace_back(at, at + v.size());
    }
  }
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<size_t, size_t>> merged;
  for (auto span : spans) {
    if (!merged.empty() && span.first < merged.back().second) {
      merged.back().second = std::max(merged.back().second, span.second);
    } else {
      merged.push_back(span);
    }
  }
  std::string out;
  size_t pos = 0;
  for (auto [b, e] : merged) {
    out.append(text.substr(pos, b - pos));
    out.append(kRedactedMarker);
    pos = e;
  }
  out.append(text.substr(pos));
  return out;
}

std::string Chunked(Redactor& r, std::string_view text, const std::vector<size_t>& cuts) {
  std::string out;
  size_t pos = 0;
  for (size_t cut : cuts) {
    out += r.Feed(text.substr(pos, cut - pos));
    pos = cut;
  }
  out += r.Feed(text.substr(pos));
  out += r.Flush();
  return out;
}

TEST(RedactorTest, SpecificCases) {
  struct Case {
    std::vector<std::string> values;
    std::string text;
    std::string want;
  };
  const std::vector<Case> cases = {
      {{"hf_secret"}, "token=hf_secret done", "token=[REDACTED] done"},
      {{"hf_secret"}, "hf_secrethf_secret", "[REDACTED][REDACTED]"},     // adjacent
      {{"abab"}, "xabababy", "x[REDACTED]y"},                            // self-overlap
      {{"abcd", "abcdef"}, "abcdefg abcdx", "[REDACTED]g [REDACTED]x"},  // prefix of another
      {{"cdef", "abcdef"}, "abcdef cdef", "[REDACTED] [REDACTED]"},      // suffix of another
      {{"bcde", "abcd"}, "abcde", "[REDACTED]"},                         // overlapping values
      {{"line1\nline2"}, "a line1\nline2 b\nline1\n", "a [REDACTED] b\nline1\n"},  // multi-line
      {{"secret"}, "no match here: secre t", "no match here: secre t"},
      {{}, "nothing to hide", "nothing to hide"},
      {{"abc"}, "abc is too short to redact", "abc is too short to redact"},
      {{"", "tokn"}, "a tokn b", "a [REDACTED] b"},
      {{"tokn", "tokn"}, "tokntokn", "[REDACTED][REDACTED]"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(RedactAll(c.values, c.text), c.want) << c.text;
    EXPECT_EQ(NaiveRedact(c.values, c.text, kMinRedactedLength), c.want) << c.text;
  }
}

TEST(RedactorTest, ValueSplitAcrossTwoWritesIsRedacted) {
  Redactor r(std::vector<std::string>{"hf_CANARY_42"});
  std::string out = r.Feed("log: hf_CAN");
  EXPECT_EQ(out, "log: ");  // only the possible start of the value is held back
  EXPECT_EQ(r.held_back(), 6u);
  out += r.Feed("ARY_42 end\n");
  out += r.Flush();
  EXPECT_EQ(out, "log: [REDACTED] end\n");
  // A false start is released as soon as it cannot be a value any more.
  EXPECT_EQ(r.Feed("hf_CAT\n"), "hf_CAT\n");
  EXPECT_EQ(r.held_back(), 0u);
}

TEST(RedactorTest, ShortValuesAreCountedAndIgnored) {
  auto m = SecretMatcher::Build({"ab", "xyz", "long enough"});
  EXPECT_EQ(m->short_values_ignored(), 2u);
  EXPECT_EQ(m->pattern_count(), 1u);
  EXPECT_EQ(RedactAll(*m, "ab xyz long enough"), "ab xyz [REDACTED]");
}

// Random values over a small alphabet (so they overlap and repeat a lot), random texts built
// partly from those values, random chunkings: the stream must equal the reference.
void FuzzAgainstReference(std::mt19937& rng, int rounds, size_t max_value_len, size_t min_length,
                          size_t value_count_max, bool expect_dense) {
  const std::string alphabet = "ab\nc";
  auto rand_below = [&rng](size_t n) {
    return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::string> values(1 + rand_below(value_count_max));
    for (auto& v : values) {
      size_t len = 1 + rand_below(max_value_len);
      for (size_t i = 0; i < len; ++i) v.push_back(alphabet[rand_below(alphabet.size())]);
    }
    std::string text;
    size_t pieces = rand_below(40);
    for (size_t i = 0; i < pieces; ++i) {
      if (rand_below(3) == 0) {
        text += values[rand_below(values.size())];
      } else {
        size_t len = rand_below(8);
        for (size_t j = 0; j < len; ++j) text.push_back(alphabet[rand_below(alphabet.size())]);
      }
    }
    auto matcher = SecretMatcher::Build(values, min_length);
    if (expect_dense) {
      ASSERT_LE(matcher->state_count(), 4096u);
    }
    std::string want = NaiveRedact(values, text, min_length);
    ASSERT_EQ(RedactAll(*matcher, text), want) << "round " << round;
    for (int chunking = 0; chunking < 4; ++chunking) {
      std::set<size_t> cut_set;
      size_t cut_count = chunking == 0 ? text.size() : rand_below(text.size() + 1);
      for (size_t i = 0; i < cut_count; ++i)
        cut_set.insert(chunking == 0 ? i : rand_below(text.size() + 1));
      std::vector<size_t> cuts(cut_set.begin(), cut_set.end());
      Redactor r(matcher);
      std::string got;
      size_t pos = 0;
      for (size_t cut : cuts) {
        got += r.Feed(std::string_view(text).substr(pos, cut - pos));
        pos = cut;
        // Never more than (longest value - 1) bytes of plain text are held back.
        size_t longest = matcher->longest();
        ASSERT_LE(r.held_back(), longest == 0 ? 0 : longest - 1);
      }
      got += r.Feed(std::string_view(text).substr(pos));
      got += r.Flush();
      ASSERT_EQ(got, want) << "round " << round << " chunking " << chunking;
    }
  }
}

TEST(RedactorTest, FuzzDenseAutomatonMatchesNaiveReferenceForAnyChunking) {
  std::mt19937 rng(20261130);
  FuzzAgainstReference(rng, 1500, 7, 1, 4, /*expect_dense=*/true);
  FuzzAgainstReference(rng, 500, 9, kMinRedactedLength, 5, /*expect_dense=*/true);
}

TEST(RedactorTest, FuzzSparseAutomatonMatchesNaiveReference) {
  // Values long enough that the automaton exceeds the dense-table budget, plus short ones that
  // overlap with them.
  std::mt19937 rng(7);
  auto rand_below = [&rng](size_t n) {
    return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> values;
    for (int i = 0; i < 3; ++i) {
      std::string v;
      for (int j = 0; j < 2000; ++j) v.push_back("ab"[rand_below(2)]);
      values.push_back(v);
    }
    values.push_back(values[0].substr(500, 5));
    values.push_back("abba");
    auto matcher = SecretMatcher::Build(values, 1);
    ASSERT_GT(matcher->state_count(), 4096u);
    std::string text = "x" + values[0] + values[1].substr(0, 700) + "y" + values[2] + "abbab";
    std::string want = NaiveRedact(values, text, 1);
    std::vector<size_t> cuts;
    for (size_t c = 1 + rand_below(50); c < text.size(); c += 1 + rand_below(300))
      cuts.push_back(c);
    Redactor r(matcher);
    ASSERT_EQ(Chunked(r, text, cuts), want) << "round " << round;
  }
}

// A large log in 4 KiB writes redacts exactly like the whole text at once and like the expected
// text built alongside it. Its speed is measured in bench/redact (no timing threshold here).
TEST(RedactorTest, LargeLogInSmallWritesIsExact) {
  std::vector<std::string> values = {"hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
                                     "sk-proj-0123456789abcdef", "postgres://u:pw@db:5432/x",
                                     "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq"};
  std::string line = "2026-11-30T01:02:03.456Z rank0 step 100 loss 1.2345 lr 2e-5 tok/s 5123\n";
  std::string log, expected;
  size_t secrets_written = 0;
  for (size_t i = 0; log.size() < (4u << 20); ++i) {
    log += line;
    expected += line;
    if (i % 50 == 0) {
      log += "token " + values[(i / 50) % values.size()] + "\n";
      expected += "token [REDACTED]\n";
      ++secrets_written;
    }
  }
  Redactor r(values);
  std::string out;
  for (size_t pos = 0; pos < log.size(); pos += 4096) {
    out += r.Feed(std::string_view(log).substr(pos, 4096));
  }
  out += r.Flush();
  EXPECT_GT(secrets_written, 1000u);
  EXPECT_EQ(out.size(), expected.size());
  EXPECT_TRUE(out == expected);  // not EXPECT_EQ: a 4 MiB diff is no help
  EXPECT_TRUE(RedactAll(values, log) == expected);
}

}  // namespace
}  // namespace air::secrets
