// GptOssModel: its parameters (names, shapes, decay), creation, initialization and KV caches.
// Forward/Backward are in gpt_oss_forward.cc, decoding in gpt_oss_decode.cc; the storage of
// parameters and units is CausalLm's; HF names are io's GPT-OSS adapter's.
#include <cmath>

#include "engine/dtype.h"
#include "engine/model/gpt_oss_config.h"
#include "engine/model/gpt_oss_model_impl.h"
#include "engine/model/rope.h"
#include "engine/model/weight_init.h"

namespace air::engine {

GptOssModel::GptOssModel(ModelConfig config, std::shared_ptr<Backend> backend, ModelOptions options)
    : CausalLm(std::move(config), std::move(backend), options),
      impl_(std::make_unique<Impl>(&this->backend())) {}

GptOssModel::~GptOssModel() = default;

std::vector<OpKind> GptOssModel::OpsUsed() const {
  std::vector<OpKind> ops;
  for (OpKind op : kAllOps) {
    if (op != OpKind::kAdamWUpdate && op != OpKind::kSumOfSquares && op != OpKind::kScale &&
        op != OpKind::kSwigluForward && op != OpKind::kSwigluBackward) {
      ops.push_back(op);
    }
  }
  return ops;
}

Result<std::unique_ptr<GptOssModel>> GptOssModel::Create(const ModelConfig& config,
                                                         std::shared_ptr<Backend> backend,
                                                         const ModelOptions& options) {
  if (config.arch != Architecture::kGptOss || config.gpt_oss == nullptr) {
    return InvalidArgument(std::string("GptOssModel needs a GptOssForCausalLM config, got ") +
                           ArchitectureClassName(config.arch));
  }
  AIR_RETURN_IF_ERROR(ValidateModelConfig(config, "model config"));
  const GptOssConfig& g = *config.gpt_oss;
  if (g.output_router_logits) {
    return InvalidArgument(
        "model config: output_router_logits is true, which adds transformers' router "
        "load-balancing loss (router_aux_loss_coef); air trains GPT-OSS on the language-model "
        "loss only: set output_router_logits to false");
  }
  if (g.rope.partial_rotary_factor != 1.0) {
    return InvalidArgument("model config: partial_rotary_factor " +
                           std::to_string(g.rope.partial_rotary_factor) +
                           " is not supported for GPT-OSS (transformers rotates the whole head)");
  }
  if (backend == nullptr) return InvalidArgument("GptOssModel::Create needs a backend");
  if (options.compute_dtype != DType::kF32 && options.compute_dtype != DType::kBF16) {
    return InvalidArgument(std::string("GptOssModel computes in F32 or BF16, not ") +
                           DTypeName(options.compute_dtype));
  }
  std::unique_ptr<GptOssModel> model(new GptOssModel(config, std::move(backend), options));
  AIR_RETURN_IF_ERROR(
      CheckOpsSupport(model->backend(), model->OpsUsed(), options.compute_dtype,
                      std::string(DTypeName(options.compute_dtype)) + " GptOssForCausalLM"));
  AIR_RETURN_IF_ERROR(model->BuildParameters(ParameterSpecs(config)));
  // Weight decay as transformers' Trainer decides it: everything but biases and norm weights.
  for (Parameter& p : model->parameters()) {
    p.decay = p.name.find("bias") == std::string::npos && !p.name.ends_with("norm.weight");
  }
  model->FindWeights();
  model->MarkOverwrittenGradients();
  std::vector<float> inv_freq = GptOssRopeInverseFrequencies(g);
  if (options.buffer_dtype == DType::kBF16) {
    for (float& f : inv_freq) f = Bf16ToF32(F32ToBf16(f));
  }
  Impl& m = *model->impl_;
  m.attention_factor = static_cast<float>(g.rope.attention_factor);
  AIR_ASSIGN_OR_RETURN(m.inv_freq_buffer,
                       model->backend().AllocateView(
                           DType::kF32, {static_cast<int64_t>(inv_freq.size())}, &m.inv_freq));
  model->backend().CopyToDevice(m.inv_freq, inv_freq.data());
  return model;
}

std::vector<ParameterSpec> GptOssModel::ParameterSpecs(const ModelConfig& c) {
  const GptOssConfig& g = *c.gpt_oss;
  const int64_t dim = c.hidden_size, inter = c.intermediate_size, experts = g.num_experts;
  std::vector<ParameterSpec> specs;
  auto add = [&](std::string name, Shape shape, int layer) {
    specs.push_back(ParameterSpec{std::move(name), std::move(shape), layer});
  };
  add("tok_embeddings.weight", {c.vocab_size, dim}, -1);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const int layer = static_cast<int>(l);
    add(p + "attention_norm.weight", {dim}, layer);
    const std::pair<const char*, Shape> projections[] = {{"wq", {c.q_dim(), dim}},
                                                         {"wk", {c.kv_dim(), dim}},
                                                         {"wv", {c.kv_dim(), dim}},
                                                         {"wo", {dim, c.q_dim()}}};
    for (const auto& [name, shape] : projections) {
      add(p + "attention." + name + ".weight", shape, layer);
      if (c.attention_bias) add(p + "attention." + name + ".bias", {shape[0]}, layer);
    }
    add(p + "attention.sinks", {c.num_heads}, layer);
    add(p + "ffn_norm.weight", {dim}, layer);
    add(p + "moe.router.weight", {experts, dim}, layer);
    add(p + "moe.router.bias", {experts}, layer);
    add(p + "moe.experts.mlp1_weight", {experts, dim, 2 * inter}, layer);
    add(p + "moe.experts.mlp1_bias", {experts, 2 * inter}, layer);
    add(p + "moe.experts.mlp2_weight", {experts, inter, dim}, layer);
    add(p + "moe.experts.mlp2_bias", {experts, dim}, layer);
  }
  add("norm.weight", {dim}, -1);
  if (!c.tie_word_embeddings) add("output.weight", {c.vocab_size, dim}, -1);
  return specs;
}

void GptOssModel::FindWeights() {
  const ModelConfig& c = config();
  Impl& impl = *impl_;
  impl.embed = FindParameter("tok_embeddings.weight");
  impl.final_norm = FindParameter("norm.weight");
  impl.lm_head = c.tie_word_embeddings ? impl.embed : FindParameter("output.weight");
  impl.layers.assign(static_cast<size_t>(c.num_layers), GptOssLayerWeights{});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    GptOssLayerWeights& w = impl.layers[static_cast<size_t>(l)];
    auto linear = [&](const std::string& name) {
      return Linear{FindParameter(p + name + ".weight"), FindParameter(p + name + ".bias")};
    };
    w.attn.input_norm = FindParameter(p + "attention_norm.weight");
    w.attn.q = linear("attention.wq");
    w.attn.k = linear("attention.wk");
    w.attn.v = linear("attention.wv");
    w.attn.o = linear("attention.wo");
    w.attn.post_norm = FindParameter(p + "ffn_norm.weight");
    w.sinks = FindParameter(p + "attention.sinks");
    w.moe.router = linear("moe.router");
    w.moe.mlp1 = ExpertLinear{FindParameter(p + "moe.experts.mlp1_weight"),
                              FindParameter(p + "moe.experts.mlp1_bias")};
    w.moe.mlp2 = ExpertLinear{FindParameter(p + "moe.experts.mlp2_weight"),
                              FindParameter(p + "moe.experts.mlp2_bias")};
    w.moe.swiglu_alpha = static_cast<float>(c.gpt_oss->swiglu_alpha);
    w.moe.swiglu_limit = static_cast<float>(c.gpt_oss->swiglu_limit);
  }
}

std::vector<NamedLinear> GptOssModel::Linears() {
  std::vector<NamedLinear> out;
  for (size_t l = 0; l < impl_->layers.size(); ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerWeights& w = impl_->layers[l].attn;
    for (auto [name, linear] : {std::pair{"attention.wq", &w.q},
                                {"attention.wk", &w.k},
                                {"attention.wv", &w.v},
                                {"attention.wo", &w.o}}) {
      out.push_back({p + name, linear});
    }
  }
  return out;
}

std::vector<NamedExpertLinear> GptOssModel::ExpertLinears() {
  std::vector<NamedExpertLinear> out;
  for (size_t l = 0; l < impl_->layers.size(); ++l) {
    const std::string p = "layers." + std::to_string(l) + ".moe.experts.";
    MoeWeights& w = impl_->layers[l].moe;
    out.push_back({p + "mlp1_weight", &w.mlp1});
    out.push_back({p + "mlp2_weight", &w.mlp2});
  }
  return out;
}

void GptOssModel::InitWeights(uint64_t seed) {
  // transformers' _init_weights: norms one; Linear and expert biases zero; weights, sinks, the
  // router's weight and bias normal(0, initializer_range).
  InitWeightsLikeTransformers(*this, seed, impl_->embed, [](const Parameter& p) {
    if (p.name.ends_with("norm.weight")) return InitRule::kOne;
    const bool zero = (p.name.ends_with(".bias") && !p.name.ends_with("moe.router.bias")) ||
                      p.name.ends_with("mlp1_bias") || p.name.ends_with("mlp2_bias");
    return zero ? InitRule::kZero : InitRule::kNormal;
  });
}

Result<KvCache> GptOssModel::NewKvCache(int64_t batch, int64_t capacity) const {
  return AllocateKvCache(backend(), config(), options().compute_dtype, batch, capacity);
}

}  // namespace air::engine
