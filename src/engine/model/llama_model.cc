// LlamaModel: parameters (names, shapes), creation, loading, saving and initialization.
// Forward/Backward are in llama_forward.cc, KV-cache decoding in kv_decode.cc.
#include "engine/model/llama_model.h"

#include <cmath>
#include <numbers>
#include <random>

#include "engine/io/hf_config.h"
#include "engine/model/llama_model_impl.h"
#include "engine/model/rope.h"

namespace air::engine {

LlamaModel::LlamaModel(ModelConfig config, std::unique_ptr<Ops> ops, bool checkpointing)
    : config_(std::move(config)),
      ops_(std::move(ops)),
      activation_checkpointing_(checkpointing),
      impl_(std::make_unique<Impl>()) {}

LlamaModel::~LlamaModel() = default;

Result<std::unique_ptr<LlamaModel>> LlamaModel::Create(const ModelConfig& config,
                                                       const ModelOptions& options) {
  AIR_RETURN_IF_ERROR(ValidateModelConfig(config, "model config"));
  if (!IsKnownOpsKind(options.ops.kind)) {
    return InvalidArgument("unknown ops kind '" + options.ops.kind +
                           "': valid kinds are fast, reference");
  }
  std::unique_ptr<LlamaModel> model(
      new LlamaModel(config, CreateCpuOps(options.ops), options.activation_checkpointing));
  model->BuildParameters();
  return model;
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::FromPretrained(const std::string& model_dir,
                                                               const ModelOptions& options) {
  AIR_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  AIR_ASSIGN_OR_RETURN(auto model, Create(config, options));
  AIR_ASSIGN_OR_RETURN(auto reader, WeightReader::Open(model_dir));
  AIR_RETURN_IF_ERROR(model->LoadWeights(*reader));
  return model;
}

std::vector<ParameterSpec> LlamaModel::ParameterSpecs(const ModelConfig& c) {
  const int64_t dim = c.hidden_size, inter = c.intermediate_size;
  std::vector<ParameterSpec> specs;
  auto add = [&](std::string name, Shape shape, int layer) {
    specs.push_back(ParameterSpec{std::move(name), std::move(shape), layer});
  };
  add("model.embed_tokens.weight", {c.vocab_size, dim}, -1);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int layer = static_cast<int>(l);
    add(p + "input_layernorm.weight", {dim}, layer);
    add(p + "self_attn.q_proj.weight", {c.q_dim(), dim}, layer);
    if (c.has_qkv_bias()) add(p + "self_attn.q_proj.bias", {c.q_dim()}, layer);
    add(p + "self_attn.k_proj.weight", {c.kv_dim(), dim}, layer);
    if (c.has_qkv_bias()) add(p + "self_attn.k_proj.bias", {c.kv_dim()}, layer);
    add(p + "self_attn.v_proj.weight", {c.kv_dim(), dim}, layer);
    if (c.has_qkv_bias()) add(p + "self_attn.v_proj.bias", {c.kv_dim()}, layer);
    add(p + "self_attn.o_proj.weight", {dim, c.q_dim()}, layer);
    if (c.has_o_bias()) add(p + "self_attn.o_proj.bias", {dim}, layer);
    if (c.qk_norm) {
      add(p + "self_attn.q_norm.weight", {c.head_dim}, layer);
      add(p + "self_attn.k_norm.weight", {c.head_dim}, layer);
    }
    add(p + "post_attention_layernorm.weight", {dim}, layer);
    add(p + "mlp.gate_proj.weight", {inter, dim}, layer);
    if (c.mlp_bias) add(p + "mlp.gate_proj.bias", {inter}, layer);
    add(p + "mlp.up_proj.weight", {inter, dim}, layer);
    if (c.mlp_bias) add(p + "mlp.up_proj.bias", {inter}, layer);
    add(p + "mlp.down_proj.weight", {dim, inter}, layer);
    if (c.mlp_bias) add(p + "mlp.down_proj.bias", {dim}, layer);
  }
  add("model.norm.weight", {dim}, -1);
  if (!c.tie_word_embeddings) add("lm_head.weight", {c.vocab_size, dim}, -1);
  return specs;
}

void LlamaModel::BuildParameters() {
  const ModelConfig& c = config_;
  // The vector is filled once and never resized: LayerWeights keep pointers into it.
  params_.clear();
  for (ParameterSpec& spec : ParameterSpecs(c)) {
    const bool decay = spec.shape.size() >= 2;  // no weight decay for norms and biases
    params_.push_back(Parameter{std::move(spec.name), Tensor(std::move(spec.shape)), Tensor(),
                                spec.layer, decay});
  }

  Impl& impl = *impl_;
  impl.embed = FindParameter("model.embed_tokens.weight");
  impl.final_norm = FindParameter("model.norm.weight");
  impl.lm_head = c.tie_word_embeddings ? impl.embed : FindParameter("lm_head.weight");
  impl.layers.assign(static_cast<size_t>(c.num_layers), LayerWeights{});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights& w = impl.layers[static_cast<size_t>(l)];
    w.input_norm = FindParameter(p + "input_layernorm.weight");
    w.q_proj = FindParameter(p + "self_attn.q_proj.weight");
    w.k_proj = FindParameter(p + "self_attn.k_proj.weight");
    w.v_proj = FindParameter(p + "self_attn.v_proj.weight");
    w.o_proj = FindParameter(p + "self_attn.o_proj.weight");
    w.q_bias = FindParameter(p + "self_attn.q_proj.bias");
    w.k_bias = FindParameter(p + "self_attn.k_proj.bias");
    w.v_bias = FindParameter(p + "self_attn.v_proj.bias");
    w.o_bias = FindParameter(p + "self_attn.o_proj.bias");
    w.q_norm = FindParameter(p + "self_attn.q_norm.weight");
    w.k_norm = FindParameter(p + "self_attn.k_norm.weight");
    w.post_norm = FindParameter(p + "post_attention_layernorm.weight");
    w.gate_proj = FindParameter(p + "mlp.gate_proj.weight");
    w.up_proj = FindParameter(p + "mlp.up_proj.weight");
    w.down_proj = FindParameter(p + "mlp.down_proj.weight");
    w.gate_bias = FindParameter(p + "mlp.gate_proj.bias");
    w.up_bias = FindParameter(p + "mlp.up_proj.bias");
    w.down_bias = FindParameter(p + "mlp.down_proj.bias");
  }
  impl.inv_freq = RopeInverseFrequencies(c);
  // Norm weights start at one so a freshly created model is usable after LoadWeights of a
  // partial set in tests; InitWeights and LoadWeights overwrite everything anyway.
  for (Parameter& p : params_) {
    if (p.name.find("norm.weight") != std::string::npos) p.value.Fill(1.0f);
  }
}

Parameter* LlamaModel::FindParameter(const std::string& name) {
  for (Parameter& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

int64_t LlamaModel::NumParameters() const {
  int64_t n = 0;
  for (const Parameter& p : params_) n += p.value.numel();
  return n;
}

void LlamaModel::ZeroGrads() {
  for (Parameter& p : params_) {
    if (p.grad.shape() != p.value.shape()) {
      p.grad = Tensor(p.value.shape());
    } else {
      p.grad.SetZero();
    }
  }
}

Status LlamaModel::LoadWeights(const WeightReader& reader) {
  for (Parameter& p : params_) {
    AIR_RETURN_IF_ERROR(reader.ReadInto(p.name, p.value));
  }
  return Status::Ok();
}

void LlamaModel::InitWeights(uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Box-Muller on 53-bit uniforms: the same numbers on every platform.
  auto uniform = [&rng] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
  auto normal = [&] {
    return std::sqrt(-2.0 * std::log(uniform())) * std::cos(2.0 * std::numbers::pi * uniform());
  };
  const double stddev = config_.initializer_range;
  for (Parameter& p : params_) {
    const bool is_norm = p.name.find("norm.weight") != std::string::npos;
    const bool is_bias = p.name.ends_with(".bias");
    if (is_norm) {
      p.value.Fill(1.0f);
    } else if (is_bias) {
      p.value.SetZero();
    } else {
      for (float& v : p.value.values()) v = static_cast<float>(stddev * normal());
    }
  }
  // nn.Embedding(padding_idx) starts with the padding row at zero, as HF initializes it.
  const int64_t pad = config_.pad_token_id;
  if (pad >= 0 && pad < config_.vocab_size) {
    float* row = impl_->embed->value.data() + pad * config_.hidden_size;
    std::fill(row, row + config_.hidden_size, 0.0f);
  }
}

Status LlamaModel::Save(const std::string& dir, const SaveOptions& options) const {
  std::vector<NamedTensorRef> refs;
  refs.reserve(params_.size());
  for (const Parameter& p : params_) refs.push_back({p.name, &p.value});
  return SaveHfCheckpoint(dir, config_, refs, options);
}

KvCache LlamaModel::NewKvCache(int64_t batch, int64_t capacity) const {
  KvCache cache;
  cache.batch = batch;
  cache.capacity = capacity;
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    cache.keys.emplace_back(Shape{batch, capacity, config_.num_kv_heads, config_.head_dim});
    cache.values.emplace_back(Shape{batch, capacity, config_.num_kv_heads, config_.head_dim});
  }
  return cache;
}

}  // namespace air::engine
