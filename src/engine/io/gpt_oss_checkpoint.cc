// GPT-OSS checkpoint tensor names and the completeness check (see gpt_oss_checkpoint.h).
#include "engine/io/gpt_oss_checkpoint.h"

#include <algorithm>

#include "base/strings.h"
#include "engine/io/mxfp4.h"

namespace air::engine {

std::vector<GptOssTensorSpec> GptOssLayerTensors(const GptOssConfig& c, int64_t layer,
                                                 GptOssExpertFormat format) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const int64_t h = c.hidden_size, e = c.num_experts, i = c.intermediate_size;
  std::vector<GptOssTensorSpec> t = {
      {p + "input_layernorm.weight", {h}},
      {p + "post_attention_layernorm.weight", {h}},
      {p + "self_attn.q_proj.weight", {c.q_dim(), h}},
      {p + "self_attn.k_proj.weight", {c.kv_dim(), h}},
      {p + "self_attn.v_proj.weight", {c.kv_dim(), h}},
      {p + "self_attn.o_proj.weight", {h, c.q_dim()}},
  };
  if (c.attention_bias) {
    t.push_back({p + "self_attn.q_proj.bias", {c.q_dim()}});
    t.push_back({p + "self_attn.k_proj.bias", {c.kv_dim()}});
    t.push_back({p + "self_attn.v_proj.bias", {c.kv_dim()}});
    t.push_back({p + "self_attn.o_proj.bias", {h}});
  }
  t.push_back({p + "self_attn.sinks", {c.num_heads}});
  t.push_back({p + "mlp.router.weight", {e, h}});
  t.push_back({p + "mlp.router.bias", {e}});
  const std::string x = p + "mlp.experts.";
  if (format == GptOssExpertFormat::kMxfp4) {
    const int64_t g = kMxfp4GroupBytes;
    t.push_back({x + "gate_up_proj_blocks", {e, 2 * i, h / kMxfp4GroupSize, g}, true, true});
    t.push_back({x + "gate_up_proj_scales", {e, 2 * i, h / kMxfp4GroupSize}, true, true});
    t.push_back({x + "down_proj_blocks", {e, h, i / kMxfp4GroupSize, g}, true, true});
    t.push_back({x + "down_proj_scales", {e, h, i / kMxfp4GroupSize}, true, true});
  } else {
    t.push_back({x + "gate_up_proj", {e, h, 2 * i}, false, true});
    t.push_back({x + "down_proj", {e, i, h}, false, true});
  }
  t.push_back({x + "gate_up_proj_bias", {e, 2 * i}, false, true});
  t.push_back({x + "down_proj_bias", {e, h}, false, true});
  return t;
}

std::vector<GptOssTensorSpec> GptOssCheckpointTensors(const GptOssConfig& c,
                                                      GptOssExpertFormat format) {
  std::vector<GptOssTensorSpec> t = {{"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}}};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    auto layer = GptOssLayerTensors(c, l, format);
    t.insert(t.end(), layer.begin(), layer.end());
  }
  t.push_back({"model.norm.weight", {c.hidden_size}});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}});
  return t;
}

GptOssExpertFormat GptOssExpertFormatOf(const WeightReader& reader, const GptOssConfig& c) {
  if (c.mxfp4_experts) return GptOssExpertFormat::kMxfp4;
  return reader.Find("model.layers.0.mlp.experts.gate_up_proj_blocks", nullptr) != nullptr
             ? GptOssExpertFormat::kMxfp4
             : GptOssExpertFormat::kDense;
}

namespace {

// "a, b, c and 7 more"
std::string ListSome(const std::vector<std::string>& items, size_t max_listed) {
  std::vector<std::string> shown(
      items.begin(), items.begin() + static_cast<long>(std::min(items.size(), max_listed)));
  std::string text = Join(shown, ", ");
  if (items.size() > shown.size()) {
    text += " and " + std::to_string(items.size() - shown.size()) + " more";
  }
  return text;
}

}  // namespace

Status CheckGptOssCheckpoint(const WeightReader& reader, const GptOssConfig& config,
                             size_t max_listed) {
  const GptOssExpertFormat format = GptOssExpertFormatOf(reader, config);
  if (format == GptOssExpertFormat::kMxfp4 && (config.hidden_size % kMxfp4GroupSize != 0 ||
                                               config.intermediate_size % kMxfp4GroupSize != 0)) {
    return InvalidArgument(reader.dir() +
                           ": MXFP4 experts need hidden_size and intermediate_size divisible by " +
                           "32, got " + std::to_string(config.hidden_size) + " and " +
                           std::to_string(config.intermediate_size));
  }
  std::vector<std::string> missing_experts, missing_other, wrong;
  for (const GptOssTensorSpec& spec : GptOssCheckpointTensors(config, format)) {
    const SafetensorsFile* file = nullptr;
    const SafetensorsEntry* entry = reader.Find(spec.name, &file);
    if (entry == nullptr) {
      (spec.expert ? missing_experts : missing_other).push_back(spec.name);
      continue;
    }
    if (entry->shape != spec.shape) {
      wrong.push_back(spec.name + " has shape " + ShapeToString(entry->shape) + ", expected " +
                      ShapeToString(spec.shape));
    } else if (entry->raw_u8 != spec.packed) {
      wrong.push_back(spec.name + " is " + (entry->raw_u8 ? "U8" : DTypeName(entry->dtype)) +
                      ", expected " + (spec.packed ? "U8 (MXFP4)" : "a float type"));
    }
  }
  if (missing_experts.empty() && missing_other.empty() && wrong.empty()) return Status::Ok();
  std::vector<std::string> parts;
  const char* format_name =
      format == GptOssExpertFormat::kMxfp4 ? "MXFP4 (*_blocks/*_scales)" : "dense";
  if (!missing_experts.empty()) {
    parts.push_back(std::to_string(missing_experts.size()) + " " + format_name +
                    " expert tensors are missing: " + ListSome(missing_experts, max_listed));
  }
  if (!missing_other.empty()) {
    parts.push_back(std::to_string(missing_other.size()) +
                    " other tensors are missing: " + ListSome(missing_other, max_listed));
  }
  if (!wrong.empty()) {
    parts.push_back(std::to_string(wrong.size()) +
                    " tensors do not match the config: " + ListSome(wrong, max_listed));
  }
  return InvalidArgument("the GPT-OSS checkpoint in " + reader.dir() + " (" + reader.FileList() +
                         ") does not match its config: " + Join(parts, "; "));
}

}  // namespace air::engine
