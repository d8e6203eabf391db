// KV cache allocation (see kv_cache.h).
#include "engine/model/kv_cache.h"

namespace air::engine {

Result<KvCache> AllocateKvCache(const Backend& backend, const ModelConfig& c, DType dtype,
                                int64_t batch, int64_t capacity) {
  KvCache cache;
  cache.batch = batch;
  cache.capacity = capacity;
  const Shape shape{batch, capacity, c.num_kv_heads, c.head_dim};
  const size_t layer_bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  const auto layers = static_cast<size_t>(c.num_layers);
  AIR_ASSIGN_OR_RETURN(cache.storage, backend.Allocate(2 * layers * layer_bytes));
  for (size_t l = 0; l < layers; ++l) {
    cache.keys.emplace_back(cache.storage.get(), 2 * l * layer_bytes, dtype, shape);
    cache.values.emplace_back(cache.storage.get(), (2 * l + 1) * layer_bytes, dtype, shape);
  }
  return cache;
}

Result<int64_t> CheckDecodeStep(const KvCache& cache, const ModelConfig& c,
                                std::span<const int32_t> tokens) {
  if (cache.batch <= 0 || static_cast<int64_t>(cache.keys.size()) != c.num_layers ||
      static_cast<int64_t>(cache.values.size()) != c.num_layers) {
    return InvalidArgument("KV cache was not made by NewKvCache for this model (" +
                           std::to_string(cache.keys.size()) + " layers, model has " +
                           std::to_string(c.num_layers) + ")");
  }
  const int64_t batch = cache.batch;
  if (tokens.empty() || static_cast<int64_t>(tokens.size()) % batch != 0) {
    return InvalidArgument("ForwardStep: " + std::to_string(tokens.size()) +
                           " tokens cannot be split into " + std::to_string(batch) +
                           " rows of at least one new token");
  }
  const int64_t step = static_cast<int64_t>(tokens.size()) / batch;
  if (step > cache.remaining()) {
    return ResourceExhausted("ForwardStep: KV cache full: " + std::to_string(cache.length) +
                             " of " + std::to_string(cache.capacity) + " positions used, " +
                             std::to_string(step) + " more requested");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size) {
      return InvalidArgument("ForwardStep: token " + std::to_string(tokens[i]) + " at index " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(c.vocab_size) + ")");
    }
  }
  return step;
}

}  // namespace air::engine
