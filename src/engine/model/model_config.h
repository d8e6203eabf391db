// ModelConfig: the architecture of a decoder-only model, as read from a Hugging Face config.json
// (engine/io/hf_config.h parses and writes it): the fields every model of the engine has, which
// FSDP, the trainer, checkpoints and the memory check read. One struct covers the Llama family;
// the flags say what differs:
//   LlamaForCausalLM    GQA, optional llama3 RoPE scaling, optional attention/mlp bias
//   Qwen2ForCausalLM    bias on q/k/v projections (attention_bias is implied)
//   Qwen3ForCausalLM    RMSNorm over head_dim on q and k before RoPE (qk_norm)
//   MistralForCausalLM  sliding-window attention
// GptOssForCausalLM fills the common fields (intermediate_size is each expert's) and carries
// the rest — experts, router, sinks, YaRN, the clamped SwiGLU — in `gpt_oss`
// (model/gpt_oss_config.h), which only GptOssModel and io's GPT-OSS code read.
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace air::engine {

enum class Architecture { kLlama, kQwen2, kQwen3, kMistral, kGptOss };

struct GptOssConfig;  // model/gpt_oss_config.h

// HF class name ("LlamaForCausalLM", ...) and model_type ("llama", ...).
const char* ArchitectureClassName(Architecture arch);
const char* ArchitectureModelType(Architecture arch);
// The supported class names and model types, for error messages and help.
std::vector<std::string> SupportedArchitectureNames();
std::vector<std::string> SupportedModelTypes();

struct RopeConfig {
  std::string type = "default";  // "default" or "llama3"
  double theta = 10000.0;
  // llama3 scaling (REFERENCES.md §3), used when type == "llama3".
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;        // C
  int64_t intermediate_size = 0;  // MLP width
  int64_t num_layers = 0;         // num_hidden_layers
  int64_t num_heads = 0;          // num_attention_heads (Hq)
  int64_t num_kv_heads = 0;       // num_key_value_heads (Hkv)
  int64_t head_dim = 0;           // D; hidden_size / num_heads unless given
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // bias on q, k, v and o (Llama); Qwen2: q, k, v only
  bool mlp_bias = false;
  bool qk_norm = false;  // Qwen3
  // Per layer: the sliding window of that layer's attention, 0 for full attention.
  std::vector<int64_t> layer_sliding_window;
  double initializer_range = 0.02;
  std::string hidden_act = "silu";
  // Token ids carried through to config.json/generation_config.json; -1 when absent.
  // eos may be several ids (Llama 3 instruct lists three).
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  int64_t pad_token_id = -1;
  std::string torch_dtype = "float32";  // dtype the weights were saved in, as config.json says
  // GptOssForCausalLM's own settings (set exactly when arch == kGptOss; shared, immutable).
  std::shared_ptr<const GptOssConfig> gpt_oss;

  // Which projections carry a bias.
  bool has_qkv_bias() const { return attention_bias || arch == Architecture::kQwen2; }
  bool has_o_bias() const { return attention_bias && arch != Architecture::kQwen2; }
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t sliding_window(int64_t layer) const {
    return layer < static_cast<int64_t>(layer_sliding_window.size()) ? layer_sliding_window[layer]
                                                                     : 0;
  }
};

// Checks sizes and consistency (heads divide, head_dim even, vocab > 0, ...); errors name
// `source` and the field.
Status ValidateModelConfig(const ModelConfig& config, const std::string& source);

}  // namespace air::engine
