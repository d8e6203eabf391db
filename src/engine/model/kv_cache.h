// KvCache: the keys and values of every layer for tokens already processed, so generation
// computes only the new tokens (LlamaModel::ForwardStep). Keys are stored after RoPE (and after
// Qwen3's q/k norm), exactly what attention reads.
// The cache lives on the model's backend: one buffer holding every layer's keys and values.
// Thread safety: owned by one generation loop; not shared.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/model/model_config.h"
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

// A cache for `batch` rows of up to `capacity` tokens of every layer of `config`, keys and
// values (B, capacity, Hkv, D) in `dtype`, on `backend` (the models' NewKvCache).
Result<KvCache> AllocateKvCache(const Backend& backend, const ModelConfig& config, DType dtype,
                                int64_t batch, int64_t capacity);

// The new tokens per row of a ForwardStep(tokens, cache): checks that the cache is this
// config's, that `tokens` splits into cache.batch rows of at least one token that fit in the
// cache, and that every token is in the vocabulary (errors name the token and index).
Result<int64_t> CheckDecodeStep(const KvCache& cache, const ModelConfig& config,
                                std::span<const int32_t> tokens);

}  // namespace air::engine
