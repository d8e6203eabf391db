// LoraConfig and LoraPlan: LoRA as PEFT's LoraConfig describes it (TRL's flat keys in `air
// train`'s parameters: use_peft, lora_r, lora_alpha, lora_dropout, lora_target_modules,
// use_rslora, lora_modules_to_save, plus lora_adapter_path), and which parts of a model it
// touches, decided by PEFT's rules over transformers' module paths (the model's names go through
// its state-dict adapter, io/state_dict_adapter.h):
//
//   target_modules  "all-linear": every linear layer but the output head (PEFT's
//                   _maybe_include_all_linear_layers); a list: a module whose path equals an entry
//                   or ends with "." + entry; any other string: a regex that must match a module
//                   path whole (re.fullmatch); unset: PEFT's default for the architecture
//                   (q_proj and v_proj for Llama, Qwen2, Qwen3, Mistral; none for GPT-OSS: an
//                   error)
//   target_parameters  PEFT's LoRA on parameters (its ParamWrapper): a parameter whose path
//                   equals an entry or ends with "." + entry gets an adapter; air adapts the
//                   per-expert weights of a mixture of experts (GPT-OSS's
//                   mlp.experts.gate_up_proj [E, H, 2I] and mlp.experts.down_proj [E, I, H]),
//                   with lora_dropout 0 (PEFT refuses dropout there). PEFT nests the wrappers of
//                   one module's parameters in the module's parameter order, and names the
//                   adapter after the wrapper: with both targeted, gate_up_proj's is
//                   "mlp.experts.base_layer.lora_A.weight" and down_proj's
//                   "mlp.experts.lora_A.weight"; alone, either is "mlp.experts.lora_A.weight"
//   modules_to_save every module whose path ends with an entry (PEFT's _set_trainable) is trained
//                   whole; LoRA never targets a module inside one
//   scaling         alpha / r, or alpha / sqrt(r) with use_rslora
//
// Errors (before any weight is read): r <= 0; a list entry or a regex that matches no linear
// layer, or names a module that is not one (naming the modules that exist); a target parameter
// that matches no expert weight (naming those that exist), or lora_dropout != 0 with one; a
// modules_to_save entry that matches no module; modules_to_save on a tied embedding (PEFT
// would untie it).
// Thread safety: plain data and functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/causal_lm.h"

namespace air::engine::lora {

// PEFT's target_modules.
struct TargetModules {
  enum class Kind { kDefault, kAllLinear, kNames, kRegex };
  Kind kind = Kind::kDefault;
  std::vector<std::string> names;  // kNames
  std::string pattern;             // kRegex
};

struct LoraConfig {
  bool enabled = false;  // use_peft
  int r = 16;            // TRL's defaults (ModelConfig): r 16, alpha 32, dropout 0.05
  double alpha = 32.0;
  double dropout = 0.05;
  TargetModules targets;
  bool use_rslora = false;
  std::vector<std::string> modules_to_save;
  // PEFT's target_parameters, as given (and saved).
  std::vector<std::string> target_parameters;
  // A PEFT adapter directory (or a hub id in the HF cache) to start from; its
  // adapter_config.json then decides r, alpha, dropout, targets, rslora and modules_to_save.
  std::string adapter_path;

  // alpha / r, or alpha / sqrt(r) with use_rslora.
  float Scaling() const;
};

// One linear layer that gets an adapter.
struct LoraTarget {
  std::string module;     // the model's name: "layers.0.attention.wq"
  std::string hf_module;  // transformers' path: "model.layers.0.self_attn.q_proj"
  int layer = -1;
  int64_t in = 0, out = 0;
};

// One per-expert weight that gets an adapter (PEFT's target_parameters).
struct LoraParameterTarget {
  std::string parameter;     // the model's: "layers.0.moe.experts.mlp1_weight"
  std::string hf_parameter;  // transformers': "model.layers.0.mlp.experts.gate_up_proj"
  // The adapter's module, named as PEFT names its wrapper: "layers.0.moe.experts" or, wrapped
  // by another parameter's adapter of the same module, "layers.0.moe.experts.base_layer".
  std::string module;
  int layer = -1;
  int64_t experts = 0, in = 0, out = 0;
};

struct LoraPlan {
  std::vector<LoraTarget> targets;                     // in the model's order
  std::vector<LoraParameterTarget> parameter_targets;  // in the model's order
  std::vector<std::string> trained_whole;              // modules_to_save's parameters (model names)
  std::vector<std::string> target_names;  // what adapter_config.json's target_modules says
};

// Names a config key for an error: "cfg.yaml:3:1: lora_r" (or just the key).
using WhereFn = std::function<std::string(const std::string& key)>;

// Decides the plan for `model` (read only: nothing is changed). Errors name the key via `where`.
Result<LoraPlan> PlanLora(const LoraConfig& config, CausalLm& model, const WhereFn& where);

// The model's linear layers as transformers' module paths, and every module path of its
// parameters (with their parents), for messages and matching.
std::vector<std::string> HfLinearModules(CausalLm& model);
std::vector<std::string> HfModulePaths(const CausalLm& model);

}  // namespace air::engine::lora
