// A tiny random Llama-family model for the engine's model tests: a two-layer config of each
// architecture (Llama with biases, tied embeddings and llama3 RoPE; Qwen3 with q/k norms; Mistral
// with a sliding window), built on a backend by name with livelier weights than HF's init, and a
// packed batch with padding.
#pragma once

#include <memory>
#include <random>
#include <string>

#include "engine/data/batch.h"
#include "engine/model/llama_model.h"
#include "test_util.h"

namespace air::engine::testing {

inline ModelConfig TinyConfig(Architecture arch) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = arch == Architecture::kQwen3 ? 12 : 8;
  c.rms_norm_eps = 1e-5;
  c.qk_norm = arch == Architecture::kQwen3;
  c.layer_sliding_window.assign(2, arch == Architecture::kMistral ? 3 : 0);
  if (arch == Architecture::kLlama) {
    c.rope = RopeConfig{"llama3", 500000.0, 8.0, 1.0, 4.0, 64};
    c.attention_bias = true;
    c.mlp_bias = true;
    c.tie_word_embeddings = true;
  }
  return c;
}

inline std::unique_ptr<LlamaModel> TinyModel(Architecture arch,
                                             const std::string& ops = "reference",
                                             uint64_t seed = 1, const ModelOptions& options = {}) {
  auto model = LlamaModel::Create(TinyConfig(arch), MakeBackend(ops), options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  (*model)->InitWeights(seed);
  // Non-trivial norm weights and biases, so their gradients are checked for real.
  std::mt19937_64 rng(seed + 100);
  std::normal_distribution<float> noise(0.0f, 0.2f);
  for (Parameter& p : (*model)->parameters()) {
    if (p.shape.size() == 1) {
      for (float& v : Host(p.value)) v += noise(rng);
    } else {
      for (float& v : Host(p.value)) v *= 4.0f;  // 0.02 -> 0.08: livelier activations
    }
  }
  return std::move(model).value();
}

// Two rows of 9 tokens: row 1 packs two documents and ends with padding.
inline TokenBatch TinyBatch() {
  TokenBatch b;
  b.batch_size = 2;
  b.seq_len = 9;
  b.input_ids = {3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 32, 38, 4, 6, 2, 0, 0};
  b.labels = {3, 14, 15, 9, 26, 5, 35, 8, 9, -100, 9, 32, -100, 4, 6, 2, -100, -100};
  b.position_ids = {0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 0, 1, 2, 3, 0, 0};
  b.segment_ids = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0};
  return b;
}

inline const Architecture kArchs[] = {Architecture::kLlama, Architecture::kQwen2,
                                      Architecture::kQwen3, Architecture::kMistral};

}  // namespace air::engine::testing
