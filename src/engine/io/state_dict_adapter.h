// StateDictAdapter: the map between a model's own parameter names (model/causal_lm.h) and a
// checkpoint format's — torchtitan's state_dict_adapter. Hugging Face names live here, not in
// the model: Llama's "layers.0.attention.wq.weight" is transformers'
// "model.layers.0.self_attn.q_proj.weight". Every load and save of HF files (hf_state_dict.h)
// and every name a user sees in an HF context (a missing tensor, a PEFT module path) goes
// through one.
// Thread safety: immutable after construction.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/model/model_config.h"

namespace air::engine {

class StateDictAdapter {
 public:
  virtual ~StateDictAdapter() = default;
  // The HF tensor name of a model parameter (every parameter has one).
  virtual std::string ToHf(const std::string& name) const = 0;
  // The model parameter an HF tensor name is, or nullopt for a name the model has no parameter
  // for.
  virtual std::optional<std::string> FromHf(const std::string& hf_name) const = 0;
};

// The adapter of the architecture `config` describes.
std::unique_ptr<StateDictAdapter> StateDictAdapterFor(const ModelConfig& config);

}  // namespace air::engine
