// LlamaModel: its parameters (names, shapes), creation, initialization and KV caches.
// Forward/Backward are in llama_forward.cc, KV-cache decoding in kv_decode.cc; the storage of
// parameters and units is CausalLm's (causal_lm.cc); HF names are io's Llama adapter's.
#include "engine/model/llama_model.h"

#include <cmath>

#include "engine/dtype.h"
#include "engine/model/llama_model_impl.h"
#include "engine/model/rope.h"
#include "engine/model/weight_init.h"

namespace air::engine {

LlamaModel::LlamaModel(ModelConfig config, std::shared_ptr<Backend> backend, ModelOptions options)
    : CausalLm(std::move(config), std::move(backend), options),
      impl_(std::make_unique<Impl>(&this->backend())) {}

LlamaModel::~LlamaModel() = default;

std::vector<OpKind> LlamaModel::OpsUsed() const {
  std::vector<OpKind> ops;
  for (OpKind op : kAllOps) {
    if (op != OpKind::kAdamWUpdate && op != OpKind::kSumOfSquares && op != OpKind::kScale &&
        op != OpKind::kConvert) {
      ops.push_back(op);
    }
  }
  return ops;
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::Create(const ModelConfig& config,
                                                       std::shared_ptr<Backend> backend,
                                                       const ModelOptions& options) {
  AIR_RETURN_IF_ERROR(ValidateModelConfig(config, "model config"));
  if (backend == nullptr) return InvalidArgument("LlamaModel::Create needs a backend");
  if (options.compute_dtype != DType::kF32 && options.compute_dtype != DType::kBF16) {
    return InvalidArgument(std::string("LlamaModel computes in F32 or BF16, not ") +
                           DTypeName(options.compute_dtype));
  }
  std::unique_ptr<LlamaModel> model(new LlamaModel(config, std::move(backend), options));
  AIR_RETURN_IF_ERROR(CheckOpsSupport(
      model->backend(), model->OpsUsed(), options.compute_dtype,
      std::string(DTypeName(options.compute_dtype)) + " " + ArchitectureClassName(config.arch)));
  AIR_RETURN_IF_ERROR(model->BuildParameters(ParameterSpecs(config)));
  model->FindWeights();
  model->MarkOverwrittenGradients();
  // RoPE's inverse frequencies, rounded to the buffer dtype (FSDP's buffer_dtype casts them),
  // live on the device; the per-batch cos/sin tables are built there from the positions.
  std::vector<float> inv_freq = RopeInverseFrequencies(config);
  if (options.buffer_dtype == DType::kBF16) {
    for (float& f : inv_freq) f = Bf16ToF32(F32ToBf16(f));
  }
  Impl& m = *model->impl_;
  AIR_ASSIGN_OR_RETURN(m.inv_freq_buffer,
                       model->backend().AllocateView(
                           DType::kF32, {static_cast<int64_t>(inv_freq.size())}, &m.inv_freq));
  model->backend().CopyToDevice(m.inv_freq, inv_freq.data());
  return model;
}

std::vector<ParameterSpec> LlamaModel::ParameterSpecs(const ModelConfig& c) {
  const int64_t dim = c.hidden_size, inter = c.intermediate_size;
  std::vector<ParameterSpec> specs;
  auto add = [&](std::string name, Shape shape, int layer) {
    specs.push_back(ParameterSpec{std::move(name), std::move(shape), layer});
  };
  add("tok_embeddings.weight", {c.vocab_size, dim}, -1);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const int layer = static_cast<int>(l);
    add(p + "attention_norm.weight", {dim}, layer);
    add(p + "attention.wq.weight", {c.q_dim(), dim}, layer);
    if (c.has_qkv_bias()) add(p + "attention.wq.bias", {c.q_dim()}, layer);
    add(p + "attention.wk.weight", {c.kv_dim(), dim}, layer);
    if (c.has_qkv_bias()) add(p + "attention.wk.bias", {c.kv_dim()}, layer);
    add(p + "attention.wv.weight", {c.kv_dim(), dim}, layer);
    if (c.has_qkv_bias()) add(p + "attention.wv.bias", {c.kv_dim()}, layer);
    add(p + "attention.wo.weight", {dim, c.q_dim()}, layer);
    if (c.has_o_bias()) add(p + "attention.wo.bias", {dim}, layer);
    if (c.qk_norm) {
      add(p + "attention.q_norm.weight", {c.head_dim}, layer);
      add(p + "attention.k_norm.weight", {c.head_dim}, layer);
    }
    add(p + "ffn_norm.weight", {dim}, layer);
    add(p + "feed_forward.w1.weight", {inter, dim}, layer);
    if (c.mlp_bias) add(p + "feed_forward.w1.bias", {inter}, layer);
    add(p + "feed_forward.w3.weight", {inter, dim}, layer);
    if (c.mlp_bias) add(p + "feed_forward.w3.bias", {inter}, layer);
    add(p + "feed_forward.w2.weight", {dim, inter}, layer);
    if (c.mlp_bias) add(p + "feed_forward.w2.bias", {dim}, layer);
  }
  add("norm.weight", {dim}, -1);
  if (!c.tie_word_embeddings) add("output.weight", {c.vocab_size, dim}, -1);
  return specs;
}

void LlamaModel::FindWeights() {
  const ModelConfig& c = config();
  Impl& impl = *impl_;
  impl.embed = FindParameter("tok_embeddings.weight");
  impl.final_norm = FindParameter("norm.weight");
  impl.lm_head = c.tie_word_embeddings ? impl.embed : FindParameter("output.weight");
  impl.layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerWeights& w = impl.layers[static_cast<size_t>(l)];
    auto linear = [&](const std::string& name) {
      return Linear{FindParameter(p + name + ".weight"), FindParameter(p + name + ".bias")};
    };
    w.input_norm = FindParameter(p + "attention_norm.weight");
    w.q = linear("attention.wq");
    w.k = linear("attention.wk");
    w.v = linear("attention.wv");
    w.o = linear("attention.wo");
    w.q_norm = FindParameter(p + "attention.q_norm.weight");
    w.k_norm = FindParameter(p + "attention.k_norm.weight");
    w.post_norm = FindParameter(p + "ffn_norm.weight");
    w.gate = linear("feed_forward.w1");
    w.up = linear("feed_forward.w3");
    w.down = linear("feed_forward.w2");
  }
}

std::vector<NamedLinear> LlamaModel::Linears() {
  std::vector<NamedLinear> out;
  for (size_t l = 0; l < impl_->layers.size(); ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerWeights& w = impl_->layers[l];
    for (auto [name, linear] : {std::pair{"attention.wq", &w.q},
                                {"attention.wk", &w.k},
                                {"attention.wv", &w.v},
                                {"attention.wo", &w.o},
                                {"feed_forward.w1", &w.gate},
                                {"feed_forward.w3", &w.up},
                                {"feed_forward.w2", &w.down}}) {
      out.push_back({p + name, linear});
    }
  }
  return out;
}

void LlamaModel::InitWeights(uint64_t seed) {
  // transformers' _init_weights: norms one, biases zero, weights normal(0, initializer_range).
  InitWeightsLikeTransformers(*this, seed, impl_->embed, [](const Parameter& p) {
    if (p.name.ends_with("norm.weight")) return InitRule::kOne;
    return p.name.ends_with(".bias") ? InitRule::kZero : InitRule::kNormal;
  });
}

Result<KvCache> LlamaModel::NewKvCache(int64_t batch, int64_t capacity) const {
  return AllocateKvCache(backend(), config(), options().compute_dtype, batch, capacity);
}

}  // namespace air::engine
