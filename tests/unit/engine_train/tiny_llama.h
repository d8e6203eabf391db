// The tiny random-initialized Llama the engine_train tests train, checkpoint and shard (two
// layers of width 16 over a 41-token vocabulary, on the reference backend): one definition, so
// that trainer_test.cc, checkpoint_faults_test.cc and fsdp_test.cc test the same model.
// Thread safety: pure functions.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "engine/backend/registry.h"
#include "engine/model/llama_model.h"

namespace air::testing {

inline constexpr int kTinyLlamaVocab = 41;

// Llama, hidden 16, intermediate 24, 4 heads of 4 (2 KV heads), 64 positions, eps 1e-5.
inline engine::ModelConfig TinyLlamaConfig(int64_t num_layers = 2) {
  engine::ModelConfig c;
  c.arch = engine::Architecture::kLlama;
  c.vocab_size = kTinyLlamaVocab;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = num_layers;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-5;
  return c;
}

// TinyLlamaConfig() on a reference backend, its weights drawn from `seed`.
inline std::unique_ptr<engine::LlamaModel> TinyLlama(uint64_t seed) {
  auto model =
      engine::LlamaModel::Create(TinyLlamaConfig(), *engine::CreateBackend({.kind = "reference"}));
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  (*model)->InitWeights(seed);
  return std::move(*model);
}

}  // namespace air::testing
