// KvCache: the keys and values of every layer for tokens already processed, so generation
// computes only the new tokens (LlamaModel::ForwardStep). Keys are stored after RoPE (and after
// Qwen3's q/k norm), exactly what attention reads.
// The cache lives on the model's backend: one buffer holding every layer's keys and values.
// Thread safety: owned by one generation loop; not shared.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/view.h"

namespace air::engine {

struct KvCache {
  int64_t batch = 0;                // B rows decoded in lockstep (same length each)
  int64_t capacity = 0;             // max tokens per row
  int64_t length = 0;               // tokens already in the cache (the next token's position)
  std::unique_ptr<Buffer> storage;  // every layer's keys and values
  std::vector<View> keys;           // per layer (B, capacity, Hkv, D)
  std::vector<View> values;         // per layer (B, capacity, Hkv, D)

  int64_t remaining() const { return capacity - length; }
  // Forgets the cached tokens (keeps the memory).
  void Clear() { length = 0; }
};

}  // namespace air::engine
