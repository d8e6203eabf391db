// GptOssModel: transformers' GptOssForCausalLM as a CausalLm (model/causal_lm.h), with a
// hand-written forward and backward per layer (model/gpt_oss_layer.h, model/moe.h):
//
//   x = embed(input_ids)                                  (B, T, C)
//   for each layer:  x = x + Attn(RMSNorm(x)) (sinks, sliding or full, YaRN RoPE)
//                    x = x + MoE(RMSNorm(x))  (router top-k, experts grouped by expert)
//   logits = head(RMSNorm(x))                             (B, T, V)  (untied unless configured)
//   loss = mean over labels != -100 of CE(logits[:, t-1], labels[:, t])   (HF shift)
//
// The common ModelConfig carries the GPT-OSS settings in config().gpt_oss. Parameters carry the
// model's own names (io's GPT-OSS state-dict adapter maps them to transformers'):
//   tok_embeddings.weight, norm.weight, output.weight
//   layers.L.attention_norm.weight, layers.L.ffn_norm.weight
//   layers.L.attention.{wq,wk,wv,wo}.{weight,bias}, layers.L.attention.sinks
//   layers.L.moe.router.{weight,bias}
//   layers.L.moe.experts.{mlp1_weight [E, C, 2I], mlp1_bias [E, 2I], mlp2_weight [E, I, C],
//                         mlp2_bias [E, C]}  (gate/up interleaved in mlp1, as transformers)
// Weight decay follows transformers' Trainer: every parameter but biases and norm weights (the
// sinks decay; the experts' 2-D biases do not). FSDP units, hooks, activation checkpointing,
// mixed precision and the fused head work as for LlamaModel; the MoE reads its per-expert row
// ranges back to the host once per layer per pass (E + 1 integers).
//
// Not supported (an error at Create): output_router_logits (transformers' load-balancing loss)
// and partial_rotary_factor != 1.
// Thread safety: one thread drives a model (and its backend) at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/model/causal_lm.h"

namespace air::engine {

class GptOssModel : public CausalLm {
 public:
  // A model on `backend` with all weights zero and norm weights one (InitWeights or io's
  // loading next). Validates the config (arch kGptOss with its gpt_oss settings) and that the
  // backend supports every op in the compute dtype.
  static Result<std::unique_ptr<GptOssModel>> Create(const ModelConfig& config,
                                                     std::shared_ptr<Backend> backend,
                                                     const ModelOptions& options = {});
  // The parameters a model of this config has, in order, without allocating them.
  static std::vector<ParameterSpec> ParameterSpecs(const ModelConfig& config);
  // The bytes Forward's workspace takes for a pass of `shape` in `compute` (measured by its own
  // layout, nothing allocated).
  static size_t PassWorkspaceBytes(const ModelConfig& config, DType compute,
                                   const PassShape& shape);
  ~GptOssModel() override;

  std::vector<OpKind> OpsUsed() const override;
  void InitWeights(uint64_t seed) override;
  Result<ForwardResult> Forward(const TokenBatch& batch,
                                const ForwardOptions& options = {}) override;
  Status Backward() override;
  // The attention projections q, k, v, o of every layer: what transformers builds as nn.Linear,
  // so what PEFT's all-linear adapts. The router is called through a Linear descriptor too but is
  // transformers' GptOssTopKRouter (not an nn.Linear: PEFT cannot target it), and the experts
  // are 3-D parameters: neither is listed.
  std::vector<NamedLinear> Linears() override;
  // The experts' gate_up (mlp1) and down (mlp2) weights of every layer, in that order (the order
  // of transformers' GptOssExperts parameters, which decides PEFT's nesting of its wrappers).
  std::vector<NamedExpertLinear> ExpertLinears() override;
  Result<KvCache> NewKvCache(int64_t batch, int64_t capacity) const override;
  Result<Tensor> ForwardStep(std::span<const int32_t> tokens, KvCache& cache,
                             bool all_positions = false) override;

 private:
  struct Impl;
  GptOssModel(ModelConfig config, std::shared_ptr<Backend> backend, ModelOptions options);
  void FindWeights();

  std::unique_ptr<Impl> impl_;
};

}  // namespace air::engine
