// LlamaModel: the decoder-only Llama family (Llama, Qwen2, Qwen3, Mistral) as a CausalLm
// (model/causal_lm.h), with a hand-written forward and backward per layer
// (model/decoder_layer.h):
//
//   x = embed(input_ids)                                  (B, T, C)
//   for each layer:  x = x + Attn(RMSNorm(x));  x = x + MLP(RMSNorm(x))
//   logits = head(RMSNorm(x))                             (B, T, V)  (head = embed if tied)
//   loss = mean over labels != -100 of CE(logits[:, t-1], labels[:, t])   (HF shift)
//
// Parameters carry the model's own names (torchtitan's: tok_embeddings, layers.L.attention.wq,
// .feed_forward.w1/w2/w3, attention_norm, ffn_norm, norm, output); io's Llama state-dict
// adapter maps them to and from transformers' names. The backend comes from outside; every
// buffer is allocated on it and every number computed by it. Activations are in the compute
// dtype (ModelOptions), per-row statistics, the head's logits and the loss in fp32. Activations
// live in a workspace laid out at the first step of a batch shape and reused: the step loop
// allocates nothing on the host and reads back one scalar (the loss sum) per Forward.
//
// Batch rules: input ids in [0, vocab), labels -100 or in [0, vocab), positions >= 0; tokens
// attend to earlier tokens of the same segment id (TokenBatch comment), and sliding-window
// layers only to the last `window` of them. Invalid batches are an InvalidArgument naming the
// row, column and value.
//
// Thread safety: one thread drives a model (and its backend) at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/model/causal_lm.h"

namespace air::engine {

class LlamaModel : public CausalLm {
 public:
  // A model of this architecture on `backend`, with all weights zero and norm weights one
  // (call InitWeights, or load weights through io's adapter, next). Validates the config and
  // that the backend supports every op in the compute dtype.
  static Result<std::unique_ptr<LlamaModel>> Create(const ModelConfig& config,
                                                    std::shared_ptr<Backend> backend,
                                                    const ModelOptions& options = {});
  // The parameters a model of this config has, in order, without allocating them.
  static std::vector<ParameterSpec> ParameterSpecs(const ModelConfig& config);
  // The bytes Forward's workspace takes for a pass of `shape` in `compute` (measured by its own
  // layout, nothing allocated).
  static size_t PassWorkspaceBytes(const ModelConfig& config, DType compute,
                                   const PassShape& shape);
  ~LlamaModel() override;

  std::vector<OpKind> OpsUsed() const override;
  void InitWeights(uint64_t seed) override;
  Result<ForwardResult> Forward(const TokenBatch& batch,
                                const ForwardOptions& options = {}) override;
  Status Backward() override;
  Result<KvCache> NewKvCache(int64_t batch, int64_t capacity) const override;
  Result<Tensor> ForwardStep(std::span<const int32_t> tokens, KvCache& cache,
                             bool all_positions = false) override;
  std::vector<NamedLinear> Linears() override;

 private:
  struct Impl;
  LlamaModel(ModelConfig config, std::shared_ptr<Backend> backend, ModelOptions options);
  // Points the layer descriptors at the parameters (after BuildParameters).
  void FindWeights() override;

  std::unique_ptr<Impl> impl_;  // layer weights, workspace, saved activations
};

}  // namespace air::engine
