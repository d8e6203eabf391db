// GPT-OSS config checks and the YaRN attention factor (see gpt_oss_config.h).
#include "engine/model/gpt_oss_config.h"

#include <cmath>

namespace air::engine {

namespace {

double GetMscale(double scale, double mscale) {
  if (scale <= 1) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

Status Bad(const std::string& source, const std::string& field, const std::string& message) {
  return InvalidArgument(source + ": field '" + field + "' " + message);
}

}  // namespace

double YarnAttentionFactor(double factor, double mscale, double mscale_all_dim) {
  if (mscale != 0 && mscale_all_dim != 0) {
    return GetMscale(factor, mscale) / GetMscale(factor, mscale_all_dim);
  }
  return GetMscale(factor, 1.0);
}

ModelConfig GptOssModelConfig(const GptOssConfig& g) {
  ModelConfig c;
  c.arch = Architecture::kGptOss;
  c.vocab_size = g.vocab_size;
  c.hidden_size = g.hidden_size;
  c.intermediate_size = g.intermediate_size;
  c.num_layers = g.num_layers;
  c.num_heads = g.num_heads;
  c.num_kv_heads = g.num_kv_heads;
  c.head_dim = g.head_dim;
  c.rms_norm_eps = g.rms_norm_eps;
  c.rope.type = g.rope.type;
  c.rope.theta = g.rope.theta;
  c.rope.factor = g.rope.factor;
  c.rope.original_max_position_embeddings = g.rope.original_max_position_embeddings;
  c.max_position_embeddings = g.max_position_embeddings;
  c.tie_word_embeddings = g.tie_word_embeddings;
  c.attention_bias = g.attention_bias;
  c.layer_sliding_window = g.layer_sliding_window;
  c.initializer_range = g.initializer_range;
  c.bos_token_id = g.bos_token_id;
  c.eos_token_ids = g.eos_token_ids;
  c.pad_token_id = g.pad_token_id;
  c.torch_dtype = g.torch_dtype;
  c.gpt_oss = std::make_shared<const GptOssConfig>(g);
  return c;
}

Status ValidateGptOssConfig(const GptOssConfig& c, const std::string& source) {
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"num_local_experts", c.num_experts},
      {"num_experts_per_tok", c.experts_per_token},
      {"max_position_embeddings", c.max_position_embeddings}};
  for (const auto& [field, value] : positive) {
    if (value <= 0) return Bad(source, field, "must be positive, got " + std::to_string(value));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return Bad(source, "num_key_value_heads",
               "(" + std::to_string(c.num_kv_heads) + ") must divide num_attention_heads (" +
                   std::to_string(c.num_heads) + ")");
  }
  if (c.experts_per_token > c.num_experts) {
    return Bad(source, "num_experts_per_tok",
               "(" + std::to_string(c.experts_per_token) + ") cannot exceed num_local_experts (" +
                   std::to_string(c.num_experts) + ")");
  }
  if (static_cast<int64_t>(c.layer_sliding_window.size()) != c.num_layers) {
    return Bad(source, "layer_types",
               "must list one type per layer (" + std::to_string(c.num_layers) + "), got " +
                   std::to_string(c.layer_sliding_window.size()));
  }
  const int64_t rotary = static_cast<int64_t>(c.head_dim * c.rope.partial_rotary_factor);
  if (rotary <= 0 || rotary % 2 != 0 || rotary > c.head_dim) {
    return Bad(source, "head_dim",
               "(" + std::to_string(c.head_dim) + ") times partial_rotary_factor must be a " +
                   "positive even number of rotary dimensions, got " + std::to_string(rotary));
  }
  if (!(c.rms_norm_eps > 0)) return Bad(source, "rms_norm_eps", "must be positive");
  if (!(c.swiglu_limit > 0)) return Bad(source, "swiglu_limit", "must be positive");
  if (!(c.rope.theta > 0)) return Bad(source, "rope_theta", "must be positive");
  if (c.rope.type == "yarn") {
    if (!(c.rope.factor >= 1.0)) {
      return Bad(source, "rope_parameters.factor",
                 "must be a number >= 1 for YaRN, got " + std::to_string(c.rope.factor));
    }
    if (c.rope.original_max_position_embeddings <= 0) {
      return Bad(source, "rope_parameters.original_max_position_embeddings", "must be positive");
    }
  }
  return Status::Ok();
}

}  // namespace air::engine
