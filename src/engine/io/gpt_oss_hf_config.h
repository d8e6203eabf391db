// Reading a GPT-OSS config.json (model_type "gpt_oss", GptOssForCausalLM) into GptOssConfig, as
// transformers' GptOssConfig reads it, and writing one back.
//
// Accepted: what transformers 5 writes (rope_parameters with rope_theta inside) and what the
// released openai/gpt-oss-20b / -120b config.json files hold (rope_theta + rope_scaling, the
// extra experts_per_token / initial_context_length keys, which transformers ignores, and
// quantization_config {"quant_method": "mxfp4"}). Defaults are transformers' (GptOssConfig and
// its __post_init__): an absent field takes the class default (the 120b shape: head_dim 64,
// num_key_value_heads 8, sliding_window 128, ...); a null head_dim is hidden_size /
// num_attention_heads, a null num_key_value_heads num_attention_heads, a null sliding_window no
// window; layer_types alternate sliding/full starting with sliding; and without
// any rope settings YaRN with factor 32, beta_fast 32, beta_slow 1, truncate false, original
// length 4096, theta 150000. num_experts is read as num_local_experts (transformers'
// attribute_map).
// Rejected, each error naming the file and the field: another model_type or architecture, a
// RoPE type other than yarn/default, per-layer-type RoPE settings, a quantization other than
// mxfp4, attention_dropout other than 0 (air trains without it), a wrong type, inconsistent
// sizes (ValidateGptOssConfig).
//
// The integrator's model_type dispatch calls IsGptOssConfig() on the parsed JSON.
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "engine/model/gpt_oss_config.h"

namespace air::engine {

inline constexpr const char* kGptOssModelType = "gpt_oss";
inline constexpr const char* kGptOssArchitecture = "GptOssForCausalLM";

// Whether config.json names GPT-OSS: model_type "gpt_oss" or architectures[0]
// "GptOssForCausalLM".
bool IsGptOssConfig(const nlohmann::json& json);

// `json` is the parsed config.json; `source` names it in errors (the file path).
Result<GptOssConfig> GptOssConfigFromJson(const nlohmann::json& json, const std::string& source);
// Parses config.json text.
Result<GptOssConfig> ParseGptOssConfig(const std::string& text, const std::string& source);
// Reads DIR/config.json.
Result<GptOssConfig> LoadGptOssConfig(const std::string& model_dir);

// The config.json transformers loads back into the same GptOssConfig (rope_parameters form);
// `dtype` is written as "dtype" ("float32" or "bfloat16"). quantization_config is written when
// mxfp4_experts is set.
nlohmann::ordered_json GptOssConfigToJson(const GptOssConfig& config, const std::string& dtype);

}  // namespace air::engine
