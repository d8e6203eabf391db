// config.json <-> ModelConfig (see hf_config.h).
#include "engine/io/hf_config.h"

#include <cmath>
#include <optional>

#include "base/strings.h"
#include "engine/io/gpt_oss_hf_config.h"
#include "engine/io/json_fields.h"
#include "engine/model/gpt_oss_config.h"

namespace air::engine {

namespace {

using nlohmann::json;

Result<Architecture> ArchitectureOf(const json& j, const std::string& source) {
  const auto names = SupportedArchitectureNames();
  const auto types = SupportedModelTypes();
  const std::string supported =
      "supported model types: " + Join(types, ", ") + " (" + Join(names, ", ") + ")";
  constexpr Architecture kLlamaFamily[] = {Architecture::kLlama, Architecture::kQwen2,
                                           Architecture::kQwen3, Architecture::kMistral};
  auto mt = j.find("model_type");
  const std::string type = mt != j.end() && mt->is_string() ? mt->get<std::string>() : "";
  const std::string with_type = type.empty() ? "" : " (model_type '" + type + "')";
  auto it = j.find("architectures");
  if (it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->empty() || !(*it)[0].is_string()) {
      return InvalidArgument(source + ": field 'architectures' must be a list of class names " +
                             "such as [\"LlamaForCausalLM\"], got " + it->dump());
    }
    const std::string name = (*it)[0].get<std::string>();
    for (Architecture a : kLlamaFamily) {
      if (name == ArchitectureClassName(a)) return a;
    }
    return InvalidArgument(
        source + ": architecture '" + name + "'" + with_type + " is not supported; " + supported +
        (EditDistance(name, ClosestMatch(name, names)) <= 3 ? DidYouMeanSuffix(name, names)
                                                            : std::string()));
  }
  if (!type.empty()) {
    for (Architecture a : kLlamaFamily) {
      if (type == ArchitectureModelType(a)) return a;
    }
    return InvalidArgument(source + ": model_type '" + type + "' is not supported; " + supported +
                           (EditDistance(type, ClosestMatch(type, types)) <= 3
                                ? DidYouMeanSuffix(type, types)
                                : std::string()));
  }
  return InvalidArgument(source + ": field 'architectures' is required; " + supported);
}

// rope_parameters (transformers 5) or rope_theta + rope_scaling (4.x).
Status ParseRope(const json& j, const std::string& source, ModelConfig& c) {
  JsonFields top(j, source);
  RopeConfig& rope = c.rope;
  AIR_RETURN_IF_ERROR(top.Double("rope_theta", &rope.theta, 10000.0));
  const json* params = top.Get("rope_parameters");
  const char* params_field = "rope_parameters";
  if (params == nullptr) {
    params = top.Get("rope_scaling");
    params_field = "rope_scaling";
  }
  if (params == nullptr) return Status::Ok();
  if (!params->is_object()) return top.WrongType(params_field, "an object", *params);
  const std::string where = source + " (" + params_field + ")";
  for (auto it = params->begin(); it != params->end(); ++it) {
    if (it->is_object()) {
      return InvalidArgument(source + ": field '" + params_field +
                             "' holds per-layer-type RoPE settings ('" + it.key() +
                             "'), which air does not support; use one set for all layers");
    }
  }
  JsonFields r(*params, where);
  AIR_RETURN_IF_ERROR(r.Double("rope_theta", &rope.theta, rope.theta));
  std::string type;
  AIR_RETURN_IF_ERROR(r.String("rope_type", &type, ""));
  if (type.empty()) AIR_RETURN_IF_ERROR(r.String("type", &type, "default"));
  if (type != "default" && type != "llama3") {
    return InvalidArgument(source + ": field '" + params_field + ".rope_type' is '" + type +
                           "'; supported RoPE types: default, llama3");
  }
  rope.type = type;
  if (type == "llama3") {
    AIR_RETURN_IF_ERROR(r.Double("factor", &rope.factor, 8.0));
    AIR_RETURN_IF_ERROR(r.Double("low_freq_factor", &rope.low_freq_factor, 1.0));
    AIR_RETURN_IF_ERROR(r.Double("high_freq_factor", &rope.high_freq_factor, 4.0));
    AIR_RETURN_IF_ERROR(r.Int("original_max_position_embeddings",
                              &rope.original_max_position_embeddings, c.max_position_embeddings));
  }
  return Status::Ok();
}

// Per-layer sliding windows from sliding_window, use_sliding_window, max_window_layers and
// layer_types, as each architecture's transformers config interprets them.
Status ParseSlidingWindows(const json& j, const std::string& source, ModelConfig& c) {
  JsonFields r(j, source);
  // Checked before anything is sized by it (one entry per layer here, parameters later).
  constexpr int64_t kMaxLayers = 1024;  // the largest models have about 128
  if (c.num_layers > kMaxLayers) {
    return InvalidArgument(source + ": field 'num_hidden_layers' is " +
                           std::to_string(c.num_layers) + "; at most " +
                           std::to_string(kMaxLayers) + " layers are supported");
  }
  int64_t window = 0;
  AIR_RETURN_IF_ERROR(r.Int("sliding_window", &window, 0));
  if (window < 0) {
    return InvalidArgument(source + ": field 'sliding_window' must be positive or null, got " +
                           std::to_string(window));
  }
  c.layer_sliding_window.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), 0);
  if (c.arch == Architecture::kLlama || window == 0) return Status::Ok();
  bool use_window = true;
  AIR_RETURN_IF_ERROR(r.Bool("use_sliding_window", &use_window, c.arch == Architecture::kMistral));
  if (!use_window) return Status::Ok();
  if (const json* types = r.Get("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c.num_layers) {
      return InvalidArgument(source + ": field 'layer_types' must list one type per layer (" +
                             std::to_string(c.num_layers) + "), got " + types->dump());
    }
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      if (!t.is_string() || (t != "sliding_attention" && t != "full_attention")) {
        return InvalidArgument(source + ": field 'layer_types[" + std::to_string(i) +
                               "]' must be \"full_attention\" or \"sliding_attention\", got " +
                               t.dump());
      }
      if (t == "sliding_attention") c.layer_sliding_window[i] = window;
    }
    return Status::Ok();
  }
  int64_t first_sliding = 0;  // Mistral: every layer
  if (c.arch != Architecture::kMistral) {
    AIR_RETURN_IF_ERROR(r.Int("max_window_layers", &first_sliding, 28));
  }
  for (int64_t i = first_sliding; i < c.num_layers; ++i) c.layer_sliding_window[i] = window;
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ModelConfigFromJson(const json& j, const std::string& source) {
  if (!j.is_object()) {
    return InvalidArgument(source + ": expected a JSON object, got " + j.type_name());
  }
  if (IsGptOssConfig(j)) {
    AIR_ASSIGN_OR_RETURN(GptOssConfig gpt_oss, GptOssConfigFromJson(j, source));
    return GptOssModelConfig(gpt_oss);
  }
  ModelConfig c;
  AIR_ASSIGN_OR_RETURN(c.arch, ArchitectureOf(j, source));
  JsonFields r(j, source);
  AIR_RETURN_IF_ERROR(ReadCommonHfFields(r, std::nullopt, c));
  AIR_RETURN_IF_ERROR(r.Int("hidden_size", &c.hidden_size, std::nullopt));
  AIR_RETURN_IF_ERROR(r.Int("intermediate_size", &c.intermediate_size, std::nullopt));
  AIR_RETURN_IF_ERROR(r.Int("num_hidden_layers", &c.num_layers, std::nullopt));
  AIR_RETURN_IF_ERROR(r.Int("num_attention_heads", &c.num_heads, std::nullopt));
  AIR_RETURN_IF_ERROR(r.Int("num_key_value_heads", &c.num_kv_heads, c.num_heads));
  const int64_t default_head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
  AIR_RETURN_IF_ERROR(r.Int("head_dim", &c.head_dim, default_head_dim));
  AIR_RETURN_IF_ERROR(r.Double("rms_norm_eps", &c.rms_norm_eps, 1e-6));
  AIR_RETURN_IF_ERROR(r.Int("max_position_embeddings", &c.max_position_embeddings, 2048));
  AIR_RETURN_IF_ERROR(r.Bool("attention_bias", &c.attention_bias, false));
  AIR_RETURN_IF_ERROR(r.Bool("mlp_bias", &c.mlp_bias, false));
  AIR_RETURN_IF_ERROR(r.String("hidden_act", &c.hidden_act, "silu"));
  c.qk_norm = c.arch == Architecture::kQwen3;
  // Which flags each transformers class reads: Qwen2 always has q/k/v bias (and no o bias),
  // Mistral never has a bias, mlp_bias exists only in Llama.
  if (c.arch == Architecture::kQwen2 || c.arch == Architecture::kMistral) {
    c.attention_bias = false;
  }
  if (c.arch != Architecture::kLlama) c.mlp_bias = false;
  AIR_RETURN_IF_ERROR(ParseRope(j, source, c));
  AIR_RETURN_IF_ERROR(ParseSlidingWindows(j, source, c));
  AIR_RETURN_IF_ERROR(ValidateModelConfig(c, source));
  return c;
}

Result<ModelConfig> ParseModelConfig(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return InvalidArgument(source + ": not valid JSON: " + e.what());
  }
  return ModelConfigFromJson(j, source);
}

Result<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  AIR_ASSIGN_OR_RETURN(ConfigText config, ReadModelConfigText(model_dir));
  return ParseModelConfig(config.text, config.path);
}

const std::vector<std::string>& KnownConfigFields() {
  static const std::vector<std::string> kFields = {
      "architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
      "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps",
      "max_position_embeddings", "tie_word_embeddings", "attention_bias", "mlp_bias",
      "initializer_range", "hidden_act", "rope_theta", "rope_scaling", "rope_parameters",
      "sliding_window", "use_sliding_window", "max_window_layers", "layer_types", "bos_token_id",
      "eos_token_id", "pad_token_id", "dtype", "torch_dtype",
      // GptOssForCausalLM's
      "num_local_experts", "num_experts", "num_experts_per_tok", "experts_per_token",
      "swiglu_alpha", "swiglu_limit", "router_aux_loss_coef", "output_router_logits",
      "attention_dropout", "quantization_config", "initial_context_length"};
  return kFields;
}

nlohmann::ordered_json ModelConfigToJson(const ModelConfig& c, const std::string& dtype) {
  if (c.arch == Architecture::kGptOss) {
    // air writes dense expert weights (never MXFP4): no quantization_config.
    GptOssConfig gpt_oss = *c.gpt_oss;
    gpt_oss.mxfp4_experts = false;
    return GptOssConfigToJson(gpt_oss, dtype);
  }
  nlohmann::ordered_json j;
  j["architectures"] = {ArchitectureClassName(c.arch)};
  j["model_type"] = ArchitectureModelType(c.arch);
  WriteCommonHfSizes(j, c);
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["initializer_range"] = c.initializer_range;
  j["rope_theta"] = c.rope.theta;
  nlohmann::ordered_json rope;
  rope["rope_type"] = c.rope.type;
  rope["rope_theta"] = c.rope.theta;
  if (c.rope.type == "llama3") {
    rope["factor"] = c.rope.factor;
    rope["low_freq_factor"] = c.rope.low_freq_factor;
    rope["high_freq_factor"] = c.rope.high_freq_factor;
    rope["original_max_position_embeddings"] = c.rope.original_max_position_embeddings;
  }
  j["rope_parameters"] = rope;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.arch != Architecture::kQwen2) j["attention_bias"] = c.attention_bias;
  if (c.arch == Architecture::kLlama) j["mlp_bias"] = c.mlp_bias;
  j["attention_dropout"] = 0.0;
  int64_t window = 0, first_sliding = c.num_layers;
  for (int64_t l = c.num_layers - 1; l >= 0; --l) {
    if (c.sliding_window(l) > 0) {
      window = c.sliding_window(l);
      first_sliding = l;
    }
  }
  if (c.arch == Architecture::kMistral) {
    j["sliding_window"] = window > 0 ? nlohmann::ordered_json(window) : nullptr;
  } else if (c.arch == Architecture::kQwen2 || c.arch == Architecture::kQwen3) {
    j["use_sliding_window"] = window > 0;
    j["sliding_window"] = window > 0 ? nlohmann::ordered_json(window) : nullptr;
    j["max_window_layers"] = first_sliding;
    nlohmann::ordered_json types = nlohmann::ordered_json::array();
    for (int64_t l = 0; l < c.num_layers; ++l) {
      types.push_back(c.sliding_window(l) > 0 ? "sliding_attention" : "full_attention");
    }
    j["layer_types"] = types;
  }
  WriteTokenIds(j, c.bos_token_id, c.eos_token_ids, c.pad_token_id);
  j["dtype"] = dtype;
  j["use_cache"] = true;
  return j;
}

nlohmann::ordered_json GenerationConfigJson(const ModelConfig& c) {
  nlohmann::ordered_json j;
  if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  if (c.eos_token_ids.size() > 1) j["eos_token_id"] = c.eos_token_ids;
  if (c.pad_token_id >= 0) j["pad_token_id"] = c.pad_token_id;
  j["use_cache"] = true;
  return j;
}

}  // namespace air::engine
