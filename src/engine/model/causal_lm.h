// CausalLm: the one interface every causal language model of the engine implements (Llama
// today, GPT-OSS next), and the one FSDP (engine/fsdp), the trainer, checkpoints (through a
// state-dict adapter, io/state_dict_adapter.h) and generation use. A model is written for one
// device; sharding, activation checkpointing, mixed precision and LoRA are applied to it from
// outside through this interface (torchtitan's parallelize.py and model_converter ideas):
//
//   parameters   named views (model/parameter.h) with the model's own names (torchtitan's:
//                "layers.0.attention.wq.weight"); Hugging Face names live in the adapter
//   units        FSDP's granularity: one flat storage per decoder layer plus the root unit
//                (embedding, final norm, head), a frozen and a trainable segment
//                (model/parameter.h); a unit's storage can be released to, and bound from, an
//                owner outside the model (ReleaseUnitStorage / BindUnit), in any float dtype
//                (FSDP binds bf16 compute copies under mixed precision)
//   linears      the Linear descriptors every projection is called through (model/linear.h),
//                and the ExpertLinear ones of a mixture of experts, where converters attach
//                adapters; a converter adds its parameters (AddParameters) before the units get
//                storage
//   hooks        UnitHooks run before and after each unit's forward and backward
//   checkpointed units   which layers keep only their input in the forward and recompute in
//                the backward (ApplyActivationCheckpointing, engine/train)
//   compute      Forward / Backward over a TokenBatch; ForwardStep with a KV cache
//
// The storage half (parameters, units, gradients, binding) is implemented here once; a model
// implements the compute half and its parameter list.
//
// Training use: ZeroGrads(); for each micro-batch: Forward(batch, {.loss_scale = s}); Backward();
// Backward accumulates d(s * mean loss of the batch)/d(param) into every trainable gradient, so
// gradient accumulation is repeated Forward/Backward pairs with s = batch tokens / all tokens.
// The head's gradient is computed inside the training Forward (a fused, chunked linear +
// cross-entropy: the N x V logits never exist), which is why the scale is given there.
//
// Thread safety: one thread drives a model (and its backend) at a time.
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
#include "engine/model/linear.h"
#include "engine/model/lm_head.h"
#include "engine/model/model_config.h"
#include "engine/model/parameter.h"
#include "engine/tensor.h"

namespace air::engine {

struct ModelOptions {
  // The dtype of the activations and of the parameter views the model computes with: F32, or
  // BF16 under mixed precision (FSDP's param_dtype; fp32 master weights stay outside).
  DType compute_dtype = DType::kF32;
  // The dtype of the model's buffers (RoPE's inverse frequencies are rounded to it, as FSDP's
  // buffer_dtype casts module buffers); the cos/sin tables are always computed in fp32.
  DType buffer_dtype = DType::kF32;
  // No unit gets storage at creation; each gets it from AllocateUnitStorage. FSDP loads and
  // shards one unit at a time this way, so a rank never holds the whole model.
  bool deferred_storage = false;
};

// What a forward/backward pass's device memory (its workspace) depends on besides the config
// and the compute dtype.
struct PassShape {
  int64_t batch = 1, seq = 1;
  bool training = true;
  bool unfused_head = false;       // the whole (N, V) logits instead of a chunk
  bool head_gradient = true;       // training writes the head's gradient (false: a frozen head)
  bool segments = true;            // packed or padded rows carry segment ids
  std::vector<bool> checkpointed;  // per layer: activation checkpointing (training)
  HeadPacking head_packing;        // the head weight's packed copies (lm_head.h), if any
};

struct ForwardOptions {
  // Keep activations for Backward (training). False for evaluation: less memory, no Backward.
  bool training = true;
  // Training: Backward accumulates the gradient of loss_scale * (mean loss of this batch).
  float loss_scale = 1.0f;
  // Copy the logits (B, T, V) into ForwardResult::logits (materializes them: the unfused head).
  bool return_logits = false;
  // The head as one (N, V) logits product instead of row chunks (to measure what fusing saves).
  bool unfused_head = false;
  // Seeds the randomness of a training forward (adapters' dropout, model/linear.h): the same
  // seed draws the same masks, so a recomputed layer (activation checkpointing) matches its
  // forward and a resumed run repeats the masks of the run it continues.
  uint64_t rng_seed = 0;
  // Where the loss goes. Empty (the default): the forward reads its loss sum back to the host
  // (ForwardResult::loss_sum; a device sync). An F64 scalar on the model's backend: the forward
  // adds its loss sum into it on the device and reads nothing back (ForwardResult's loss and
  // loss_sum stay 0), so a trainer sums its micro-batches there and reads once per step.
  // Not with return_logits in evaluation (that loss is read back).
  View loss_sum_into;
};

struct ForwardResult {
  double loss = 0.0;        // mean cross-entropy over loss tokens; 0 when there are none
  double loss_sum = 0.0;    // sum of the per-token losses (0 with ForwardOptions::loss_sum_into)
  int64_t loss_tokens = 0;  // labels != -100 after the shift
  Tensor logits;            // (B, T, V) on the host, when ForwardOptions::return_logits
};

// Called around each FSDP unit's forward and backward with the unit's index into units():
// a decoder layer l is unit l; the root unit (embedding, final norm, head) is root_unit() ==
// num_layers, and brackets the whole pass. Order in a training step: root, 0 .. L-1 forward
// (each before/after), root's after_forward after the loss (the head's gradient is written into
// the root unit's gradients during the forward: it must be bound by root's before_forward);
// root, L-1 .. 0 backward; root's after_backward last. With activation checkpointing a layer's
// recomputation runs between its before_backward and its backward. Empty functions are skipped.
struct UnitHooks {
  std::function<void(int unit)> before_forward;
  std::function<void(int unit)> after_forward;
  std::function<void(int unit)> before_backward;
  std::function<void(int unit)> after_backward;
};

class CausalLm {
 public:
  virtual ~CausalLm();
  CausalLm(const CausalLm&) = delete;
  CausalLm& operator=(const CausalLm&) = delete;

  // ---- what the model is ----------------------------------------------------------------
  const ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }
  const Backend& backend() const { return *backend_; }
  const std::shared_ptr<Backend>& shared_backend() const { return backend_; }
  // The ops this model's forward and backward call (for Ops::Supports, before anything runs).
  virtual std::vector<OpKind> OpsUsed() const = 0;

  // ---- parameters and units -------------------------------------------------------------
  // Parameters in the model's order; the vector never changes size (pointers stay valid).
  std::vector<Parameter>& parameters() { return params_; }
  const std::vector<Parameter>& parameters() const { return params_; }
  Parameter* FindParameter(const std::string& name);
  const Parameter* FindParameter(const std::string& name) const;
  int64_t NumParameters() const;
  int64_t NumTrainableParameters() const;
  // units()[l] is decoder layer l, units()[root_unit()] the root unit.
  std::vector<ParamGroup>& units() { return units_; }
  const std::vector<ParamGroup>& units() const { return units_; }
  int root_unit() const { return static_cast<int>(units_.size()) - 1; }
  // Freezes (false) or unfreezes a parameter by name; NotFound naming it otherwise. A unit with
  // the model's own storage is laid out again (its values move between the segments);
  // FailedPrecondition once its storage is bound from outside (FSDP applied).
  Status SetTrainable(const std::string& name, bool trainable);
  // Adds parameters (a converter's: LoRA adapters) while no unit has storage yet (a model
  // created with ModelOptions::deferred_storage): each joins its layer's unit (layer -1: the
  // root) after the model's own. The parameter list is rebuilt, so Parameter pointers and the
  // model's Linear descriptors are renewed (attached adapters are dropped): add first, then
  // attach. FailedPrecondition once a unit has storage; InvalidArgument for a name in use.
  Status AddParameters(std::vector<ParameterSpec> specs);
  // Every linear layer the model calls through a Linear descriptor, with its module name (the
  // model's: "layers.0.attention.wq"); the head is not one (it is fused with the loss).
  virtual std::vector<NamedLinear> Linears() = 0;
  // Every per-expert linear layer (a mixture of experts' [E, in, out] weights, model/linear.h's
  // ExpertLinear) with its weight's name; none for a dense model.
  virtual std::vector<NamedExpertLinear> ExpertLinears() { return {}; }

  // ---- storage, held by the model or bound from outside ---------------------------------
  // Gives a unit created with deferred storage its F32 value buffer (zeros, norm weights one).
  Status AllocateUnitStorage(int unit);
  // Frees the model's own value and gradient buffers of `unit`; its views stay empty until a
  // BindUnit (EnsureGradients and ZeroGrads leave an external unit alone).
  void ReleaseUnitStorage(int unit);
  // Points the unit's parameter views at `frozen` (frozen_numel elements: its frozen
  // parameters in order) and `trainable` (trainable_numel elements), each of any float dtype,
  // and `grads` (trainable_numel F32, or empty); the memory stays the caller's.
  void BindUnit(int unit, const View& frozen, const View& trainable, const View& grads);
  // Allocates (when missing) and zeroes the gradients of every unit the model holds itself
  // (ZeroUnitGradients).
  Status ZeroGrads();
  // Zeroes unit `unit`'s gradients held in `grads` (its trainable segment's order, at least
  // trainable_numel elements; any past them zeroed too) before a step or micro-batch, except the
  // gradients of parameters whose writes all overwrite first (Parameter::grad_overwrites): those
  // are marked unwritten, and their first weight-gradient GEMM writes them with beta 0. The
  // model's backward zeroes what no write reached before the unit's after_backward hook
  // (FinishUnitGradients), so a gradient never reaches a reader stale.
  void ZeroUnitGradients(int unit, const View& grads) const;
  // Zeroes the gradients of unit `unit` still marked unwritten.
  void FinishUnitGradients(int unit) const;

  // ---- what is applied from outside -----------------------------------------------------
  void set_unit_hooks(UnitHooks hooks) { hooks_ = std::move(hooks); }
  // Decoder layers whose activations are recomputed in the backward (empty: none).
  void set_checkpointed_layers(std::vector<bool> layers) { checkpointed_ = std::move(layers); }
  bool checkpointed(int layer) const {
    return layer < static_cast<int>(checkpointed_.size()) && checkpointed_[layer];
  }

  // ---- compute --------------------------------------------------------------------------
  // HF-style initialization (normal(0, initializer_range) for matrices, zero biases, one for
  // norm weights), deterministic for a seed.
  virtual void InitWeights(uint64_t seed) = 0;
  virtual Result<ForwardResult> Forward(const TokenBatch& batch,
                                        const ForwardOptions& options = {}) = 0;
  // FailedPrecondition unless a training Forward preceded it (one Backward per Forward).
  virtual Status Backward() = 0;
  // A cache for `batch` rows of up to `capacity` tokens each.
  virtual Result<KvCache> NewKvCache(int64_t batch, int64_t capacity) const = 0;
  // Feeds `tokens` (B, n) — n new tokens per row at positions cache.length ... — appends their
  // keys/values to the cache and returns logits on the host: (B, V) for the last new token of
  // each row, or (B, n, V) when all_positions.
  virtual Result<Tensor> ForwardStep(std::span<const int32_t> tokens, KvCache& cache,
                                     bool all_positions = false) = 0;

 protected:
  CausalLm(ModelConfig config, std::shared_ptr<Backend> backend, ModelOptions options);
  // Builds params_ and units_ from `specs` (layer >= 0: that layer's unit; -1: the root) and,
  // unless deferred, allocates every unit. Called by the model's Create (then FindWeights).
  Status BuildParameters(std::vector<ParameterSpec> specs);
  // Points the model's own descriptors (layer weights, Linears) at params_ after it was built
  // or rebuilt.
  virtual void FindWeights() = 0;
  // Marks the gradients whose writes all overwrite first (Parameter::grad_overwrites): the
  // linear layers' weights and an untied head ("output.weight"). After every FindWeights.
  void MarkOverwrittenGradients();
  // Allocates and zeroes the gradient buffers of held units that have none.
  Status EnsureGradients();
  const UnitHooks& hooks() const { return hooks_; }

 private:
  ModelConfig config_;
  ModelOptions options_;
  std::shared_ptr<Backend> backend_;
  UnitHooks hooks_;
  std::vector<bool> checkpointed_;
  std::vector<Parameter> params_;
  std::vector<ParamGroup> units_;
};

}  // namespace air::engine
