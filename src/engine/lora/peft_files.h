// PEFT's adapter files, read and written as PEFT 0.21 does (REFERENCES.md §12):
//
//   adapter_config.json        {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r", "lora_alpha",
//                              "lora_dropout", "target_modules" (a list; all-linear is written
//                              expanded to the module paths, as PEFT saves it; a regex as a
//                              string), "use_rslora", "modules_to_save", "bias": "none",
//                              "init_lora_weights": true, "base_model_name_or_path", ...}
//                              "target_parameters" (a list as given, or null)
//   adapter_model.safetensors  "base_model.model." + the HF module path + ".lora_A.weight"
//                              [r, in] and ".lora_B.weight" [out, r]; a target parameter's
//                              under its wrapper's path ("model.layers.0.mlp.experts[.base_layer]")
//                              [r*E, in] and [out, r*E] (lora_model.h converts lora_B's layout);
//                              modules_to_save's parameters under their HF names (the adapter
//                              name is dropped)
//
// Reading accepts what air can train: LORA with bias "none", no DoRA, no fan_in_fan_out, no
// rank/alpha patterns, no layers_to_transform — anything else is an error naming the field. An
// adapter is checked against the model before any weight is read: every tensor it holds must be
// one of the model's adapter parameters with the model's shape, and every one of those must be
// present; the first mismatch is named (another base model, another rank, a missing layer).
// Thread safety: functions and a reader used by one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "engine/io/safetensors.h"
#include "engine/lora/lora_model.h"
#include "engine/model/causal_lm.h"

namespace air::engine::lora {

inline constexpr const char* kAdapterConfigName = "adapter_config.json";
inline constexpr const char* kAdapterWeightsName = "adapter_model.safetensors";
inline constexpr const char* kPeftPrefix = "base_model.model.";

struct PeftAdapterConfig {
  LoraConfig lora;  // enabled, with the file's r, alpha, dropout, targets, rslora, modules
  std::string base_model_name_or_path;
};

// Reads DIR/adapter_config.json.
Result<PeftAdapterConfig> ReadPeftAdapterConfig(const std::string& dir);

// Writes DIR/adapter_config.json and DIR/adapter_model.safetensors (fp32) from `values`: a host
// tensor per parameter of `model` in its order, of which those in the adapter are written; every
// write goes through `env` (atomically: a crash leaves the previous file or none).
Status SavePeftAdapter(const std::string& dir, const CausalLm& model, const Lora& lora,
                       const std::vector<Tensor>& values,
                       const std::string& base_model_name_or_path, Env* env = DefaultEnv());

// DIR/adapter_model.safetensors, checked against a model with LoRA applied.
class PeftAdapterReader {
 public:
  static Result<std::unique_ptr<PeftAdapterReader>> Open(const std::string& dir,
                                                         const CausalLm& model, const Lora& lora);
  // Copies the adapter's tensors of `unit` (-1: every unit) into the model's parameter views.
  Status LoadUnit(CausalLm& model, const Lora& lora, int unit) const;
  const std::string& path() const { return file_->path(); }

 private:
  std::unique_ptr<SafetensorsFile> file_;
};

// The file key of a model parameter
// ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").
std::string PeftKey(const CausalLm& model, const std::string& name);

}  // namespace air::engine::lora
