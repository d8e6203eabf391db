// LlamaModel: the decoder-only Llama family (Llama, Qwen2, Qwen3, Mistral) on one device, with
// a hand-written forward and backward per layer (model/decoder_layer.h), fp32 throughout.
//
//   x = embed(input_ids)                                  (B, T, C)
//   for each layer:  x = x + Attn(RMSNorm(x));  x = x + MLP(RMSNorm(x))
//   logits = lm_head(RMSNorm(x))                          (B, T, V)  (lm_head = embed if tied)
//   loss = mean over labels != -100 of CE(logits[:, t-1], labels[:, t])   (HF shift)
//
// Training use (engine/train):
//   model->ZeroGrads();
//   for each micro-batch: r = model->Forward(batch); model->Backward(scale);
//   optimizer over model->parameters() (value, grad).
// Backward(scale) accumulates the gradient of scale * r.loss into every Parameter::grad, so
// gradient accumulation is repeated Forward/Backward pairs; to get the gradient of the mean
// over all loss tokens of several micro-batches, pass scale = r.loss_tokens / total_tokens.
// Backward must follow the Forward whose activations it uses (training mode) and consumes them
// (one Backward per Forward; the buffers are kept and reused by the next Forward).
//
// Activation checkpointing (options.activation_checkpointing or set_activation_checkpointing):
// Forward keeps only each layer's input; Backward recomputes the layer's forward before its
// backward. Gradients are bit-identical with and without it.
//
// Generation: NewKvCache + ForwardStep(tokens) computes logits of new tokens only, reusing
// cached keys/values of earlier ones.
//
// Batch rules: input ids in [0, vocab), labels -100 or in [0, vocab), positions >= 0; tokens
// attend to earlier tokens of the same segment id (TokenBatch comment), and sliding-window
// layers only to the last `window` of them. Invalid batches are an InvalidArgument naming the
// row, column and value.
//
// Thread safety: one thread drives a model at a time; ops use their own worker threads inside.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/data/batch.h"
#include "engine/io/checkpoint.h"
#include "engine/model/kv_cache.h"
#include "engine/model/model_config.h"
#include "engine/model/parameter.h"
#include "engine/ops/ops.h"
#include "engine/tensor.h"

namespace air::engine {

struct ModelOptions {
  OpsOptions ops;  // which CPU ops ("fast" or "reference") and how many threads
  bool activation_checkpointing = false;
};

struct ForwardOptions {
  // Keep activations for Backward (training). False for evaluation: less memory, no Backward.
  bool training = true;
  // Copy the logits (B, T, V) into ForwardResult::logits.
  bool return_logits = false;
};

struct ForwardResult {
  double loss = 0.0;        // mean cross-entropy over loss tokens; 0 when there are none
  double loss_sum = 0.0;    // sum of the per-token losses
  int64_t loss_tokens = 0;  // labels != -100 after the shift
  Tensor logits;            // (B, T, V) when ForwardOptions::return_logits
};

// Called around each decoder layer (e.g. by FSDP to gather a layer's shards just in time and
// to reduce its gradients as soon as they are complete). Empty functions are skipped.
struct LayerHooks {
  std::function<void(int layer)> before_forward;
  std::function<void(int layer)> before_backward;
  std::function<void(int layer)> after_backward;
};

class LlamaModel {
 public:
  // A model of this architecture with all weights zero (call InitWeights or LoadWeights next).
  // Validates the config.
  static Result<std::unique_ptr<LlamaModel>> Create(const ModelConfig& config,
                                                    const ModelOptions& options = {});
  // Reads DIR/config.json and the safetensors weights in DIR (single or sharded).
  static Result<std::unique_ptr<LlamaModel>> FromPretrained(const std::string& model_dir,
                                                            const ModelOptions& options = {});
  // The parameters a model of this config has, in HF order, without allocating them (used to
  // check a checkpoint's names and shapes cheaply).
  static std::vector<ParameterSpec> ParameterSpecs(const ModelConfig& config);
  ~LlamaModel();
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  // Loads every parameter from `reader` (converting BF16/F16 to fp32). A missing tensor or a
  // shape mismatch is an error naming the tensor, the file(s), the expected and actual shape.
  // With tied embeddings a stored lm_head.weight is ignored.
  Status LoadWeights(const WeightReader& reader);
  // HF-style initialization: linear and embedding weights ~ normal(0, initializer_range), biases
  // zero, norm weights one. Deterministic for a seed (mt19937_64, Box-Muller).
  void InitWeights(uint64_t seed);
  // Writes a checkpoint transformers loads (io/checkpoint.h).
  Status Save(const std::string& dir, const SaveOptions& options = {}) const;

  const ModelConfig& config() const { return config_; }
  const Ops& ops() const { return *ops_; }
  // Parameters in HF order (embedding, layer by layer, final norm, lm_head unless tied). The
  // vector never changes size, so pointers into it stay valid.
  std::vector<Parameter>& parameters() { return params_; }
  const std::vector<Parameter>& parameters() const { return params_; }
  Parameter* FindParameter(const std::string& name);
  int64_t NumParameters() const;  // element count

  void set_activation_checkpointing(bool on) { activation_checkpointing_ = on; }
  bool activation_checkpointing() const { return activation_checkpointing_; }
  void set_layer_hooks(LayerHooks hooks) { hooks_ = std::move(hooks); }

  Result<ForwardResult> Forward(const TokenBatch& batch, const ForwardOptions& options = {});
  // Accumulates d(scale * loss)/d(param) into every grad. FailedPrecondition if no training
  // Forward preceded it.
  Status Backward(float scale = 1.0f);
  // Allocates (first time) and zeroes every grad.
  void ZeroGrads();

  // A cache for `batch` rows of up to `capacity` tokens each.
  KvCache NewKvCache(int64_t batch, int64_t capacity) const;
  // Feeds `tokens` (B, n) row-major — n new tokens per row, at positions cache.length ... —
  // through the model, appends their keys/values to the cache and returns logits: (B, V) for
  // the last new token of each row, or (B, n, V) when all_positions. Errors when the cache
  // lacks room or a token is out of range.
  Result<Tensor> ForwardStep(std::span<const int32_t> tokens, KvCache& cache,
                             bool all_positions = false);

 private:
  struct Impl;
  LlamaModel(ModelConfig config, std::unique_ptr<Ops> ops, bool checkpointing);
  void BuildParameters();

  ModelConfig config_;
  std::unique_ptr<Ops> ops_;
  bool activation_checkpointing_ = false;
  LayerHooks hooks_;
  std::vector<Parameter> params_;
  std::unique_ptr<Impl> impl_;  // layer views into params_, saved activations
};

}  // namespace air::engine
