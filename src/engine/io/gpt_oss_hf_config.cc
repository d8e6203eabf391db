// config.json <-> GptOssConfig (see gpt_oss_hf_config.h).
#include "engine/io/gpt_oss_hf_config.h"

#include <algorithm>

#include "engine/io/json_fields.h"

namespace air::engine {

namespace {

using nlohmann::json;

// rope_parameters (transformers 5) or rope_theta + rope_scaling (the released files), with
// transformers' defaults (standardize_rope_params, _compute_yarn_parameters).
Status ParseGptOssRope(const json& j, const std::string& source, GptOssConfig& c) {
  JsonFields top(j, source);
  GptOssRope& rope = c.rope;
  double top_theta = 0;
  AIR_RETURN_IF_ERROR(top.Double("rope_theta", &top_theta, 150000.0));  // default_theta
  const char* field = "rope_parameters";
  const json* params = top.Get(field);
  if (params == nullptr) {
    field = "rope_scaling";
    params = top.Get(field);
  }
  if (params == nullptr) {  // GptOssConfig.__post_init__'s default
    rope = GptOssRope{};
    rope.theta = top_theta;
    rope.truncate = false;
    rope.attention_factor = YarnAttentionFactor(rope.factor, 0, 0);
    return Status::Ok();
  }
  if (!params->is_object()) return top.WrongType(field, "an object", *params);
  for (auto it = params->begin(); it != params->end(); ++it) {
    if (it->is_object()) {
      return top.Invalid(field, "holds per-layer-type RoPE settings ('" + it.key() +
                                    "'); GPT-OSS uses one set for all layers");
    }
  }
  const std::string where = source + " (" + field + ")";
  JsonFields r(*params, where);
  AIR_RETURN_IF_ERROR(r.Double("rope_theta", &rope.theta, top_theta));
  std::string type;
  AIR_RETURN_IF_ERROR(r.String("rope_type", &type, ""));
  if (type.empty()) AIR_RETURN_IF_ERROR(r.String("type", &type, "default"));
  if (type != "yarn" && type != "default") {
    return InvalidArgument(source + ": field '" + field + ".rope_type' is '" + type +
                           "'; GPT-OSS supports the RoPE types yarn and default");
  }
  rope.type = type;
  AIR_RETURN_IF_ERROR(r.Double("partial_rotary_factor", &rope.partial_rotary_factor, 1.0));
  if (type == "default") {
    rope.attention_factor = 1.0;
    return Status::Ok();
  }
  AIR_RETURN_IF_ERROR(r.Int("original_max_position_embeddings",
                            &rope.original_max_position_embeddings, c.max_position_embeddings));
  // A null factor means max_position_embeddings / original (transformers' DeepSeek rule).
  AIR_RETURN_IF_ERROR(r.Double(
      "factor", &rope.factor,
      static_cast<double>(c.max_position_embeddings) /
          static_cast<double>(std::max<int64_t>(1, rope.original_max_position_embeddings))));
  // `beta_fast or 32`: absent, null and 0 all mean the default.
  AIR_RETURN_IF_ERROR(r.Double("beta_fast", &rope.beta_fast, 32.0));
  if (rope.beta_fast == 0) rope.beta_fast = 32.0;
  AIR_RETURN_IF_ERROR(r.Double("beta_slow", &rope.beta_slow, 1.0));
  if (rope.beta_slow == 0) rope.beta_slow = 1.0;
  AIR_RETURN_IF_ERROR(r.Bool("truncate", &rope.truncate, true));
  double mscale = 0, mscale_all_dim = 0;
  AIR_RETURN_IF_ERROR(r.Double("mscale", &mscale, 0.0));
  AIR_RETURN_IF_ERROR(r.Double("mscale_all_dim", &mscale_all_dim, 0.0));
  if (r.Has("attention_factor")) {
    AIR_RETURN_IF_ERROR(r.Double("attention_factor", &rope.attention_factor, std::nullopt));
  } else {
    rope.attention_factor = YarnAttentionFactor(rope.factor, mscale, mscale_all_dim);
  }
  return Status::Ok();
}

// layer_types (or transformers' default: sliding on even layers) and sliding_window.
Status ParseLayers(const json& j, const std::string& source, GptOssConfig& c) {
  JsonFields r(j, source);
  constexpr int64_t kMaxLayers = 1024;  // bound before anything is sized by it
  if (c.num_layers > kMaxLayers) {
    return r.Invalid("num_hidden_layers", "is " + std::to_string(c.num_layers) + "; at most " +
                                              std::to_string(kMaxLayers) + " are supported");
  }
  // Absent: GptOssConfig's default 128; null: no window.
  const bool window_null = j.contains("sliding_window") && j["sliding_window"].is_null();
  AIR_RETURN_IF_ERROR(r.Int("sliding_window", &c.sliding_window, window_null ? 0 : 128));
  if (c.sliding_window < 0) {
    return r.Invalid("sliding_window",
                     "must be positive or null, got " + std::to_string(c.sliding_window));
  }
  const auto layers = static_cast<size_t>(std::max<int64_t>(c.num_layers, 0));
  std::vector<std::string> types;
  if (const json* list = r.Get("layer_types")) {
    if (!list->is_array() || list->size() != layers) {
      return r.Invalid("layer_types", "must list one type per layer (" +
                                          std::to_string(c.num_layers) + "), got " + list->dump());
    }
    for (size_t i = 0; i < list->size(); ++i) {
      const json& t = (*list)[i];
      if (!t.is_string() || (t != "sliding_attention" && t != "full_attention")) {
        return r.Invalid("layer_types[" + std::to_string(i) + "]",
                         "must be \"sliding_attention\" or \"full_attention\", got " + t.dump());
      }
      types.push_back(t.get<std::string>());
    }
  } else {
    for (size_t i = 0; i < layers; ++i) {
      types.push_back((i + 1) % 2 ? "sliding_attention" : "full_attention");
    }
  }
  c.layer_sliding_window.assign(layers, 0);
  for (size_t i = 0; i < layers; ++i) {
    if (types[i] != "sliding_attention") continue;
    if (c.sliding_window == 0) {
      return r.Invalid("sliding_window", "is null but layer_types[" + std::to_string(i) +
                                             "] is sliding_attention; give the window size");
    }
    c.layer_sliding_window[i] = c.sliding_window;
  }
  return Status::Ok();
}

Status ParseQuantization(const json& j, const std::string& source, GptOssConfig& c) {
  JsonFields r(j, source);
  const json* q = r.Get("quantization_config");
  if (q == nullptr) return Status::Ok();
  if (!q->is_object()) return r.WrongType("quantization_config", "an object", *q);
  std::string method;
  AIR_RETURN_IF_ERROR(JsonFields(*q, source).String("quant_method", &method, std::nullopt));
  if (method != "mxfp4") {
    return r.Invalid("quantization_config.quant_method",
                     "is '" + method + "'; GPT-OSS checkpoints air reads are bf16/fp32 or mxfp4");
  }
  c.mxfp4_experts = true;
  return Status::Ok();
}

}  // namespace

bool IsGptOssConfig(const json& j) {
  if (!j.is_object()) return false;
  auto mt = j.find("model_type");
  if (mt != j.end() && mt->is_string() && *mt == kGptOssModelType) return true;
  auto arch = j.find("architectures");
  return arch != j.end() && arch->is_array() && !arch->empty() && (*arch)[0].is_string() &&
         (*arch)[0] == kGptOssArchitecture;
}

Result<GptOssConfig> GptOssConfigFromJson(const json& j, const std::string& source) {
  if (!j.is_object()) {
    return InvalidArgument(source + ": expected a JSON object, got " + j.type_name());
  }
  JsonFields r(j, source);
  std::string model_type;
  AIR_RETURN_IF_ERROR(r.String("model_type", &model_type, ""));
  std::vector<std::string> architectures;
  AIR_RETURN_IF_ERROR(r.StringList("architectures", &architectures));
  if ((!model_type.empty() && model_type != kGptOssModelType) ||
      (!architectures.empty() && architectures[0] != kGptOssArchitecture) ||
      (model_type.empty() && architectures.empty())) {
    return InvalidArgument(
        source + ": not a GPT-OSS config: model_type '" + model_type + "', architectures " +
        (r.Has("architectures") ? r.Get("architectures")->dump() : std::string("absent")) +
        "; expected model_type \"gpt_oss\" (GptOssForCausalLM)");
  }
  GptOssConfig c;
  AIR_RETURN_IF_ERROR(ReadCommonHfFields(r, 201088, c));
  AIR_RETURN_IF_ERROR(r.Int("hidden_size", &c.hidden_size, 2880));
  AIR_RETURN_IF_ERROR(r.Int("intermediate_size", &c.intermediate_size, 2880));
  AIR_RETURN_IF_ERROR(r.Int("num_hidden_layers", &c.num_layers, 36));
  AIR_RETURN_IF_ERROR(r.Int("num_attention_heads", &c.num_heads, 64));
  // Absent: GptOssConfig's class defaults (8, 64); null: __post_init__'s derived values.
  auto is_null = [&j](const char* field) { return j.contains(field) && j[field].is_null(); };
  AIR_RETURN_IF_ERROR(r.Int("num_key_value_heads", &c.num_kv_heads,
                            is_null("num_key_value_heads") ? c.num_heads : 8));
  AIR_RETURN_IF_ERROR(
      r.Int("head_dim", &c.head_dim,
            is_null("head_dim") && c.num_heads > 0 ? c.hidden_size / c.num_heads : 64));
  const char* experts_field = r.Has("num_local_experts") ? "num_local_experts" : "num_experts";
  AIR_RETURN_IF_ERROR(r.Int(experts_field, &c.num_experts, 128));
  AIR_RETURN_IF_ERROR(r.Int("num_experts_per_tok", &c.experts_per_token, 4));
  AIR_RETURN_IF_ERROR(r.Int("max_position_embeddings", &c.max_position_embeddings, 131072));
  AIR_RETURN_IF_ERROR(r.Double("rms_norm_eps", &c.rms_norm_eps, 1e-5));
  AIR_RETURN_IF_ERROR(r.Double("swiglu_alpha", &c.swiglu_alpha, 1.702));
  AIR_RETURN_IF_ERROR(r.Double("swiglu_limit", &c.swiglu_limit, 7.0));
  AIR_RETURN_IF_ERROR(r.Bool("attention_bias", &c.attention_bias, true));
  AIR_RETURN_IF_ERROR(r.Double("router_aux_loss_coef", &c.router_aux_loss_coef, 0.001));
  AIR_RETURN_IF_ERROR(r.Bool("output_router_logits", &c.output_router_logits, false));
  double attention_dropout = 0;
  AIR_RETURN_IF_ERROR(r.Double("attention_dropout", &attention_dropout, 0.0));
  if (attention_dropout != 0) {
    return r.Invalid("attention_dropout", "is " + std::to_string(attention_dropout) +
                                              "; air trains GPT-OSS without attention dropout "
                                              "(set it to 0.0)");
  }
  AIR_RETURN_IF_ERROR(ParseLayers(j, source, c));
  AIR_RETURN_IF_ERROR(ParseGptOssRope(j, source, c));
  AIR_RETURN_IF_ERROR(ParseQuantization(j, source, c));
  AIR_RETURN_IF_ERROR(ValidateGptOssConfig(c, source));
  return c;
}

Result<GptOssConfig> ParseGptOssConfig(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(source + ": not valid JSON");
  return GptOssConfigFromJson(j, source);
}

Result<GptOssConfig> LoadGptOssConfig(const std::string& model_dir) {
  AIR_ASSIGN_OR_RETURN(ConfigText config, ReadModelConfigText(model_dir));
  return ParseGptOssConfig(config.text, config.path);
}

nlohmann::ordered_json GptOssConfigToJson(const GptOssConfig& c, const std::string& dtype) {
  nlohmann::ordered_json j;
  j["architectures"] = {kGptOssArchitecture};
  j["model_type"] = kGptOssModelType;
  WriteCommonHfSizes(j, c);
  j["num_local_experts"] = c.num_experts;
  j["num_experts_per_tok"] = c.experts_per_token;
  j["sliding_window"] = c.sliding_window > 0 ? nlohmann::ordered_json(c.sliding_window)
                                             : nlohmann::ordered_json(nullptr);
  nlohmann::ordered_json types = nlohmann::ordered_json::array();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    types.push_back(c.is_sliding(l) ? "sliding_attention" : "full_attention");
  }
  j["layer_types"] = types;
  nlohmann::ordered_json rope;
  rope["rope_type"] = c.rope.type;
  rope["rope_theta"] = c.rope.theta;
  if (c.rope.partial_rotary_factor != 1.0) {
    rope["partial_rotary_factor"] = c.rope.partial_rotary_factor;
  }
  if (c.rope.type == "yarn") {
    rope["factor"] = c.rope.factor;
    rope["beta_fast"] = c.rope.beta_fast;
    rope["beta_slow"] = c.rope.beta_slow;
    rope["truncate"] = c.rope.truncate;
    rope["original_max_position_embeddings"] = c.rope.original_max_position_embeddings;
    rope["attention_factor"] = c.rope.attention_factor;
  }
  j["rope_parameters"] = rope;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["swiglu_alpha"] = c.swiglu_alpha;
  j["swiglu_limit"] = c.swiglu_limit;
  j["attention_bias"] = c.attention_bias;
  j["attention_dropout"] = 0.0;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["initializer_range"] = c.initializer_range;
  j["router_aux_loss_coef"] = c.router_aux_loss_coef;
  j["output_router_logits"] = c.output_router_logits;
  if (c.mxfp4_experts) {
    j["quantization_config"] = {{"quant_method", "mxfp4"},
                                {"modules_to_not_convert",
                                 {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                  "model.embed_tokens", "lm_head"}}};
  }
  WriteTokenIds(j, c.bos_token_id, c.eos_token_ids, c.pad_token_id);
  j["dtype"] = dtype;
  j["use_cache"] = true;
  return j;
}

}  // namespace air::engine
