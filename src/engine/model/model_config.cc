// Architecture names (see model_config.h).
#include "engine/model/model_config.h"

#include <string>

#include "engine/model/gpt_oss_config.h"

namespace air::engine {

const char* ArchitectureClassName(Architecture arch) {
  switch (arch) {
    case Architecture::kLlama:
      return "LlamaForCausalLM";
    case Architecture::kQwen2:
      return "Qwen2ForCausalLM";
    case Architecture::kQwen3:
      return "Qwen3ForCausalLM";
    case Architecture::kMistral:
      return "MistralForCausalLM";
    case Architecture::kGptOss:
      return "GptOssForCausalLM";
  }
  return "?";
}

const char* ArchitectureModelType(Architecture arch) {
  switch (arch) {
    case Architecture::kLlama:
      return "llama";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
    case Architecture::kMistral:
      return "mistral";
    case Architecture::kGptOss:
      return "gpt_oss";
  }
  return "?";
}

std::vector<std::string> SupportedArchitectureNames() {
  return {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM",
          "GptOssForCausalLM"};
}

std::vector<std::string> SupportedModelTypes() {
  return {"llama", "qwen2", "qwen3", "mistral", "gpt_oss"};
}

Status ValidateModelConfig(const ModelConfig& c, const std::string& source) {
  if (c.arch == Architecture::kGptOss) {
    if (c.gpt_oss == nullptr) {
      return InvalidArgument(source + ": a GptOssForCausalLM config needs its GPT-OSS settings");
    }
    return ValidateGptOssConfig(*c.gpt_oss, source);
  }
  auto positive = [&](const char* field, int64_t v) {
    if (v > 0) return Status::Ok();
    return InvalidArgument(source + ": field '" + field + "' must be a positive integer, got " +
                           std::to_string(v));
  };
  AIR_RETURN_IF_ERROR(positive("vocab_size", c.vocab_size));
  AIR_RETURN_IF_ERROR(positive("hidden_size", c.hidden_size));
  AIR_RETURN_IF_ERROR(positive("intermediate_size", c.intermediate_size));
  AIR_RETURN_IF_ERROR(positive("num_hidden_layers", c.num_layers));
  AIR_RETURN_IF_ERROR(positive("num_attention_heads", c.num_heads));
  AIR_RETURN_IF_ERROR(positive("num_key_value_heads", c.num_kv_heads));
  AIR_RETURN_IF_ERROR(positive("head_dim", c.head_dim));
  AIR_RETURN_IF_ERROR(positive("max_position_embeddings", c.max_position_embeddings));
  if (c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgument(source + ": num_attention_heads (" + std::to_string(c.num_heads) +
                           ") must be a multiple of num_key_value_heads (" +
                           std::to_string(c.num_kv_heads) + ")");
  }
  if (c.head_dim % 2 != 0) {
    return InvalidArgument(source + ": head_dim must be even for rotary embeddings, got " +
                           std::to_string(c.head_dim));
  }
  if (!(c.rms_norm_eps > 0)) {
    return InvalidArgument(source + ": field 'rms_norm_eps' must be positive");
  }
  if (!(c.rope.theta > 0)) {
    return InvalidArgument(source + ": field 'rope_theta' must be positive");
  }
  if (c.hidden_act != "silu" && c.hidden_act != "swish") {
    return InvalidArgument(source + ": field 'hidden_act' is '" + c.hidden_act +
                           "'; the Llama family uses silu (the only supported activation)");
  }
  if (c.rope.type == "llama3") {
    if (!(c.rope.factor > 0) || !(c.rope.high_freq_factor > c.rope.low_freq_factor) ||
        !(c.rope.low_freq_factor > 0) || c.rope.original_max_position_embeddings <= 0) {
      return InvalidArgument(source +
                             ": llama3 rope scaling needs factor > 0, low_freq_factor > 0, "
                             "high_freq_factor > low_freq_factor and "
                             "original_max_position_embeddings > 0");
    }
  }
  if (c.arch == Architecture::kMistral) {
    for (int64_t w : c.layer_sliding_window) {
      if (w != c.sliding_window(0)) {
        return InvalidArgument(source +
                               ": MistralForCausalLM uses one sliding_window for all "
                               "layers; layer_types mixing full and sliding attention is a "
                               "Ministral/Qwen feature");
      }
    }
  }
  return Status::Ok();
}

}  // namespace air::engine
