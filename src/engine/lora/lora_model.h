// Lora: LoRA applied to a CausalLm from outside (torchtitan's model_converter; the model only
// calls its Linear descriptors, model/linear.h). Apply, on a model created with deferred storage:
//
//   1. freezes every parameter but those lora_modules_to_save trains whole;
//   2. adds, per target linear layer (lora_config.h's plan), the parameters
//      "<module>.lora_A.weight" (r, in) and "<module>.lora_B.weight" (out, r) to the layer's unit
//      (CausalLm::AddParameters), trainable — so FSDP keeps them in the unit's trainable segment
//      beside the frozen base, the optimizer and the sharded checkpoints see them, and the
//      state-dict adapter names them as PEFT does (model.layers.0.self_attn.q_proj.lora_A.weight);
//   3. attaches a LoraLinear to each target;
//   4. the same for each target parameter (a per-expert weight, PEFT's target_parameters): the
//      parameters "<module>.lora_A.weight" (E*r, in) and "<module>.lora_B.weight" (E, out, r),
//      <module> named as PEFT names its wrapper (lora_config.h), and an ExpertLora attached to
//      the ExpertLinear. PEFT's file keeps that lora_B as (out, r*E), expert e's column j at
//      j*E + e: FileShape / ToFile / FromFile convert at the files (peft_files.h).
//
// Initialization is PEFT's (init_lora_weights=True): A Kaiming-uniform with a = sqrt(5), i.e.
// U(-1/sqrt(in), 1/sqrt(in)); B zero (an expert adapter's too: PEFT's lora_A is one
// nn.Linear(in, r*E)) — drawn per adapter from (seed, adapter index), so a unit
// initialized alone (FSDP's unit-at-a-time loading) gets the values the whole model would.
//
// Thread safety: driven by the model's thread; must outlive the model's use of its adapters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/io/hf_state_dict.h"
#include "engine/lora/lora_config.h"
#include "engine/lora/lora_linear.h"
#include "engine/model/causal_lm.h"

namespace air::engine::lora {

class Lora {
 public:
  // Converts `model` (no unit may have storage yet) as `plan` says.
  static Result<std::unique_ptr<Lora>> Apply(CausalLm& model, const LoraConfig& config,
                                             const LoraPlan& plan);
  ~Lora();
  Lora(const Lora&) = delete;
  Lora& operator=(const Lora&) = delete;

  const LoraConfig& config() const { return config_; }
  const LoraPlan& plan() const { return plan_; }
  // Whether the model's parameter `name` is part of the adapter (a lora_A/lora_B or a
  // modules_to_save parameter): what adapter_model.safetensors holds.
  bool InAdapter(const std::string& name) const;
  // Whether it is a lora_A/lora_B parameter (not in the base model's files).
  static bool IsAdapterParameter(const std::string& name);
  int64_t NumAdapterParameters() const;  // lora_A and lora_B elements

  // PEFT's file layout of the model's parameter p (an expert adapter's lora_B: (out, r*E), held
  // (E, out, r)); every other parameter is stored as the model holds it.
  Shape FileShape(const Parameter& p) const;
  // p's values (a host tensor of p's shape) in the file's layout, and back.
  Tensor ToFile(const Parameter& p, const Tensor& values) const;
  Tensor FromFile(const Parameter& p, const Tensor& file) const;

  // PEFT's initialization of unit `unit`'s lora_A / lora_B (the unit must have storage).
  void InitializeUnit(int unit, uint64_t seed) const;
  // Sizes the adapters' scratch memory for batches of up to `rows` tokens in `dtype`.
  Status Reserve(int64_t rows, DType dtype);
  // The bytes Reserve(rows, dtype) allocates (measured, nothing allocated).
  size_t ReserveBytes(int64_t rows, DType dtype) const;
  // A memory failure inside a forward (nothing else fails there).
  const Status& status() const;
  const std::vector<std::unique_ptr<LoraLinear>>& adapters() const { return adapters_; }
  const std::vector<std::unique_ptr<ExpertLora>>& expert_adapters() const {
    return expert_adapters_;
  }

 private:
  Lora(CausalLm& model, LoraConfig config, LoraPlan plan)
      : model_(&model), config_(std::move(config)), plan_(std::move(plan)) {}

  CausalLm* model_;
  LoraConfig config_;
  LoraPlan plan_;
  std::unique_ptr<LoraScratch> scratch_;
  std::unique_ptr<LoraScratch> expert_scratch_;  // laid out for the experts' rows (tokens * k)
  std::vector<std::unique_ptr<LoraLinear>> adapters_;         // in plan order
  std::vector<std::unique_ptr<ExpertLora>> expert_adapters_;  // in plan order
};

// "layers.0.attention.wq" -> "layers.0.attention.wq.lora_A.weight" (and lora_B).
std::string LoraAName(const std::string& module);
std::string LoraBName(const std::string& module);

// Every parameter but LoRA's own (what the base model's files hold).
ParameterFilter BaseWeightsOnly();

}  // namespace air::engine::lora
