// LlamaModel: the decoder-only Llama family (Llama, Qwen2, Qwen3, Mistral) on one device, with
// a hand-written forward and backward per layer (model/decoder_layer.h), fp32 throughout.
//
//   x = embed(input_ids)                                  (B, T, C)
//   for each layer:  x = x + Attn(RMSNorm(x));  x = x + MLP(RMSNorm(x))
//   logits = lm_head(RMSNorm(x))                          (B, T, V)  (lm_head = embed if tied)
//   loss = mean over labels != -100 of CE(logits[:, t-1], labels[:, t])   (HF shift)
//
// The backend (engine/backend/backend.h) comes from outside: Create takes it, every buffer the
// model uses is allocated on it and every number is computed by it. Parameters are views into
// one flat buffer per FSDP unit (model/parameter.h: a unit per decoder layer plus the root
// unit), and UnitHooks run before and after each unit's forward and backward — where FSDP
// gathers a unit's shards, frees them and reduce-scatters its gradients. Loading and saving
// Hugging Face checkpoints is not the model's business: io/hf_state_dict.h maps HF names to
// the parameter views.
//
// Training use (engine/train):
//   model->ZeroGrads();
//   for each micro-batch: r = model->Forward(batch); model->Backward(scale);
//   optimizer over the trainable parameters (value and grad views).
// Backward(scale) accumulates the gradient of scale * r.loss into every trainable
// Parameter::grad, so gradient accumulation is repeated Forward/Backward pairs; to get the
// gradient of the mean over all loss tokens of several micro-batches, pass
// scale = r.loss_tokens / total_tokens. Backward must follow the Forward whose activations it
// uses (training mode) and consumes them (one Backward per Forward). Activations live in a
// workspace allocated at the first step of a batch shape and reused (workspace.h): the step
// loop allocates, copies and zeroes nothing on the host except uploading the batch's ids,
// targets and RoPE tables, and reads back one scalar (the loss sum) per Forward.
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
// Thread safety: one thread drives a model (and its backend) at a time; the backend uses its
// own worker threads inside.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/data/batch.h"
#include "engine/model/kv_cache.h"
#include "engine/model/model_config.h"
#include "engine/model/parameter.h"
#include "engine/tensor.h"

namespace air::engine {

struct ModelOptions {
  bool activation_checkpointing = false;
  // No unit gets storage at creation; each gets it from AllocateUnitStorage. FSDP loads and
  // shards one unit at a time this way, so a rank never holds the whole model
  // (fsdp::FsdpOptions::load_unit).
  bool deferred_storage = false;
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
  Tensor logits;            // (B, T, V) on the host, when ForwardOptions::return_logits
};

// Called around each FSDP unit's forward and backward with the unit's index into units():
// a decoder layer l is unit l; the root unit (embedding, final norm, lm_head) is
// root_unit() == num_layers, and brackets the whole pass (before_forward before the embedding,
// after_forward after the loss; before_backward before the head's backward, after_backward
// after the embedding's). Order in a training step: root, 0 .. L-1 forward (each before/after);
// root, L-1 .. 0 backward; root's after_backward last. With activation checkpointing a layer's
// recomputation runs between its before_backward and its backward. FSDP (ZeRO-3) gathers a
// unit's parameters in before_forward and before_backward, frees them in after_forward and
// after_backward, and reduce-scatters the unit's gradient buffer in after_backward. Empty
// functions are skipped.
struct UnitHooks {
  std::function<void(int unit)> before_forward;
  std::function<void(int unit)> after_forward;
  std::function<void(int unit)> before_backward;
  std::function<void(int unit)> after_backward;
};

class LlamaModel {
 public:
  // A model of this architecture on `backend`, with all weights zero and norm weights one
  // (call InitWeights, or io/hf_state_dict.h's LoadHfWeights, next). Validates the config.
  static Result<std::unique_ptr<LlamaModel>> Create(const ModelConfig& config,
                                                    std::shared_ptr<Backend> backend,
                                                    const ModelOptions& options = {});
  // The parameters a model of this config has, in HF order, without allocating them (used to
  // check a checkpoint's names and shapes cheaply).
  static std::vector<ParameterSpec> ParameterSpecs(const ModelConfig& config);
  ~LlamaModel();
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  // HF-style initialization: linear and embedding weights ~ normal(0, initializer_range), biases
  // zero, norm weights one. Deterministic for a seed (mt19937_64, Box-Muller).
  void InitWeights(uint64_t seed);

  const ModelConfig& config() const { return config_; }
  const Backend& backend() const { return *backend_; }
  const std::shared_ptr<Backend>& shared_backend() const { return backend_; }
  // Parameters in HF order (embedding, layer by layer, final norm, lm_head unless tied). The
  // vector never changes size, so pointers into it stay valid.
  std::vector<Parameter>& parameters() { return params_; }
  const std::vector<Parameter>& parameters() const { return params_; }
  Parameter* FindParameter(const std::string& name);
  int64_t NumParameters() const;           // element count
  int64_t NumTrainableParameters() const;  // element count of the trainable ones

  // The FSDP units: units()[l] is decoder layer l, units()[root_unit()] the root unit.
  std::vector<ParamGroup>& units() { return units_; }
  const std::vector<ParamGroup>& units() const { return units_; }
  int root_unit() const { return static_cast<int>(config_.num_layers); }

  // Freezes (false) or unfreezes a parameter by name; NotFound naming it otherwise. Its unit's
  // gradient buffer is released and laid out again (without the frozen ones) at the next
  // ZeroGrads/Backward.
  Status SetTrainable(const std::string& name, bool trainable);

  // FSDP's hold on a unit's storage (engine/fsdp/fsdp.h): ReleaseUnitStorage frees the model's
  // own value and gradient buffers of `unit` and marks it external (its views are empty until
  // bound; EnsureGradients and ZeroGrads leave it alone). BindUnit points the unit's parameter
  // views at `values` (numel F32, the unit's flat layout) and `grads` (trainable_numel F32, or
  // empty); the memory stays the caller's.
  void ReleaseUnitStorage(int unit);
  // Gives a unit created with ModelOptions::deferred_storage its value buffer (zeros, norms
  // one), as creation does for every unit otherwise; FailedPrecondition if it has one.
  Status AllocateUnitStorage(int unit);
  void BindUnit(int unit, const View& values, const View& grads);

  void set_activation_checkpointing(bool on) { activation_checkpointing_ = on; }
  bool activation_checkpointing() const { return activation_checkpointing_; }
  void set_unit_hooks(UnitHooks hooks) { hooks_ = std::move(hooks); }

  Result<ForwardResult> Forward(const TokenBatch& batch, const ForwardOptions& options = {});
  // Accumulates d(scale * loss)/d(param) into every trainable grad (allocating and zeroing
  // missing gradient buffers first). FailedPrecondition if no training Forward preceded it.
  Status Backward(float scale = 1.0f);
  // Allocates (when missing) and zeroes every unit's gradient buffer.
  Status ZeroGrads();

  // A cache on the model's backend for `batch` rows of up to `capacity` tokens each.
  Result<KvCache> NewKvCache(int64_t batch, int64_t capacity) const;
  // Feeds `tokens` (B, n) row-major — n new tokens per row, at positions cache.length ... —
  // through the model, appends their keys/values to the cache and returns logits on the host:
  // (B, V) for the last new token of each row, or (B, n, V) when all_positions. Errors when the
  // cache lacks room or a token is out of range.
  Result<Tensor> ForwardStep(std::span<const int32_t> tokens, KvCache& cache,
                             bool all_positions = false);

 private:
  struct Impl;
  LlamaModel(ModelConfig config, std::shared_ptr<Backend> backend, bool checkpointing);
  Status BuildParameters(bool deferred_storage);
  // Allocates and zeroes the gradient buffers of units that have none.
  Status EnsureGradients();

  ModelConfig config_;
  std::shared_ptr<Backend> backend_;
  bool activation_checkpointing_ = false;
  UnitHooks hooks_;
  std::vector<Parameter> params_;
  std::vector<ParamGroup> units_;
  std::unique_ptr<Impl> impl_;  // layer weights, workspace, saved activations
};

}  // namespace air::engine
