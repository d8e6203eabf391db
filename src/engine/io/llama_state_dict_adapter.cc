// The Llama family's state-dict adapter (see state_dict_adapter.h): torchtitan's parameter
// names <-> transformers' LlamaForCausalLM (Qwen2, Qwen3, Mistral share the layout).
#include <array>
#include <utility>

#include "engine/io/state_dict_adapter.h"

namespace air::engine {
namespace {

// (model, HF) name pieces: whole names for the root unit's tensors, and the part after
// "layers.L." / "model.layers.L." for a decoder layer's.
constexpr std::array<std::pair<const char*, const char*>, 3> kRootNames = {{
    {"tok_embeddings.weight", "model.embed_tokens.weight"},
    {"norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
}};
constexpr std::array<std::pair<const char*, const char*>, 11> kLayerModules = {{
    {"attention_norm", "input_layernorm"},
    {"attention.wq", "self_attn.q_proj"},
    {"attention.wk", "self_attn.k_proj"},
    {"attention.wv", "self_attn.v_proj"},
    {"attention.wo", "self_attn.o_proj"},
    {"attention.q_norm", "self_attn.q_norm"},
    {"attention.k_norm", "self_attn.k_norm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"feed_forward.w1", "mlp.gate_proj"},
    {"feed_forward.w3", "mlp.up_proj"},
    {"feed_forward.w2", "mlp.down_proj"},
}};

// "layers.12.rest" -> ("12", "rest") after stripping `prefix`; nullopt when it is not one.
std::optional<std::pair<std::string, std::string>> SplitLayer(const std::string& name,
                                                              const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return std::nullopt;
  const std::string index = name.substr(prefix.size(), dot - prefix.size());
  if (index.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::make_pair(index, name.substr(dot + 1));
}

// "wq.weight" with module table entry ("attention.wq", ...) -> the suffix after the module.
std::optional<std::string> Translate(const std::string& rest, bool to_hf) {
  for (const auto& [mine, hf] : kLayerModules) {
    const std::string from = to_hf ? mine : hf, to = to_hf ? hf : mine;
    if (rest.rfind(from + ".", 0) == 0) return to + rest.substr(from.size());
  }
  return std::nullopt;
}

class LlamaStateDictAdapter : public StateDictAdapter {
 public:
  std::string ToHf(const std::string& name) const override {
    for (const auto& [mine, hf] : kRootNames) {
      if (name == mine) return hf;
    }
    if (auto layer = SplitLayer(name, "layers.")) {
      if (auto rest = Translate(layer->second, true)) {
        return "model.layers." + layer->first + "." + *rest;
      }
    }
    return name;  // not a Llama parameter: kept as is (loading then names it as missing)
  }

  std::optional<std::string> FromHf(const std::string& hf_name) const override {
    for (const auto& [mine, hf] : kRootNames) {
      if (hf_name == hf) return std::string(mine);
    }
    if (auto layer = SplitLayer(hf_name, "model.layers.")) {
      if (auto rest = Translate(layer->second, false)) {
        return "layers." + layer->first + "." + *rest;
      }
    }
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<StateDictAdapter> StateDictAdapterFor(const ModelConfig&) {
  return std::make_unique<LlamaStateDictAdapter>();
}

}  // namespace air::engine
