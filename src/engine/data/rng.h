// Deterministic randomness for the data pipeline: SplitMix64 (Steele, Lea, Flood 2014; the
// generator Java's SplittableRandom and xoshiro's seeding use) and the permutations built on it.
//
// Shuffles must be identical on every platform, compiler and standard library, run after run,
// so a resumed or multi-node job sees the same order: std::shuffle and the std distributions
// give no such promise. The recipe, fixed forever:
//   state_0 = seed ^ (0x9E3779B97F4A7C15 * (stream + 1)); each draw: state += 0x9E3779B97F4A7C15,
//   z = state; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9; z = (z ^ z>>27) * 0x94D049BB133111EB;
//   return z ^ z>>31.
// A draw below k uses rejection (x < 2^64 - 2^64 mod k, then x mod k), unbiased. Permutation
// is Fisher-Yates from the last index down: for i = n-1..1, swap(p[i], p[Below(i+1)]).
// Thread safety: SplitMix64 is a small value type, one per user.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace air::engine {

class SplitMix64 {
 public:
  SplitMix64(uint64_t seed, uint64_t stream) : state_(seed ^ (kGamma * (stream + 1))) {}

  uint64_t Next() {
    uint64_t z = (state_ += kGamma);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound), bound >= 1.
  uint64_t Below(uint64_t bound) {
    uint64_t limit = UINT64_MAX - (UINT64_MAX % bound + 1) % bound;  // largest multiple - 1
    uint64_t x;
    do {
      x = Next();
    } while (x > limit);
    return x % bound;
  }

 private:
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ULL;
  uint64_t state_;
};

// A permutation of 0..n-1 from (seed, stream).
inline std::vector<int64_t> Permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  SplitMix64 rng(seed, stream);
  for (int64_t i = n - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(i) + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

}  // namespace air::engine
