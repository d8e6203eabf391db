// LlamaModel: parameters (names, shapes, FSDP units and their flat buffers), creation,
// trainable flags, gradients and initialization. Forward/Backward are in llama_forward.cc,
// KV-cache decoding in kv_decode.cc, HF checkpoint I/O in io/hf_state_dict.cc.
#include "engine/model/llama_model.h"

#include <cmath>
#include <numbers>
#include <random>

#include "engine/model/llama_model_impl.h"
#include "engine/model/rope.h"

namespace air::engine {

LlamaModel::LlamaModel(ModelConfig config, std::shared_ptr<Backend> backend, bool checkpointing)
    : config_(std::move(config)),
      backend_(std::move(backend)),
      activation_checkpointing_(checkpointing),
      impl_(std::make_unique<Impl>(backend_.get())) {}

LlamaModel::~LlamaModel() = default;

Result<std::unique_ptr<LlamaModel>> LlamaModel::Create(const ModelConfig& config,
                                                       std::shared_ptr<Backend> backend,
                                                       const ModelOptions& options) {
  AIR_RETURN_IF_ERROR(ValidateModelConfig(config, "model config"));
  if (backend == nullptr) return InvalidArgument("LlamaModel::Create needs a backend");
  std::unique_ptr<LlamaModel> model(
      new LlamaModel(config, std::move(backend), options.activation_checkpointing));
  AIR_RETURN_IF_ERROR(model->BuildParameters(options.deferred_storage));
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

Status LlamaModel::BuildParameters(bool deferred_storage) {
  const ModelConfig& c = config_;
  // The vector is filled once and never resized: LayerWeights and units keep pointers into it.
  params_.clear();
  const int root = root_unit();
  for (ParameterSpec& spec : ParameterSpecs(c)) {
    Parameter p;
    p.decay = spec.shape.size() >= 2;  // no weight decay for norms and biases
    p.name = std::move(spec.name);
    p.shape = std::move(spec.shape);
    p.layer = spec.layer;
    p.unit = spec.layer >= 0 ? spec.layer : root;
    params_.push_back(std::move(p));
  }
  // One flat value buffer per unit; each parameter a view at its offset (in HF order).
  units_.clear();
  units_.resize(static_cast<size_t>(root) + 1);
  for (int u = 0; u <= root; ++u) {
    units_[u].name = u == root ? "root" : "model.layers." + std::to_string(u);
  }
  for (Parameter& p : params_) {
    ParamGroup& g = units_[static_cast<size_t>(p.unit)];
    g.params.push_back(&p);
    g.numel += p.numel();
  }
  if (!deferred_storage) {
    for (int u = 0; u <= root; ++u) AIR_RETURN_IF_ERROR(AllocateUnitStorage(u));
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
  return Status::Ok();
}

Status LlamaModel::AllocateUnitStorage(int unit) {
  ParamGroup& g = units_[static_cast<size_t>(unit)];
  if (g.values != nullptr) return FailedPrecondition(g.name + " already has its storage");
  AIR_ASSIGN_OR_RETURN(g.values, backend_->AllocateView(DType::kF32, {g.numel}, &g.values_view));
  backend_->Zero(g.values_view);
  g.external = false;
  int64_t offset = 0;
  for (Parameter* p : g.params) {
    p->value =
        View(g.values.get(), static_cast<size_t>(offset) * sizeof(float), DType::kF32, p->shape);
    offset += p->numel();
    // Norm weights start at one so a freshly created model is usable after loading a partial
    // set in tests; InitWeights and LoadHfWeights overwrite everything anyway.
    if (p->name.find("norm.weight") != std::string::npos) backend_->Fill(p->value, 1.0f);
  }
  return Status::Ok();
}

Parameter* LlamaModel::FindParameter(const std::string& name) {
  for (Parameter& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

int64_t LlamaModel::NumParameters() const {
  int64_t n = 0;
  for (const Parameter& p : params_) n += p.numel();
  return n;
}

int64_t LlamaModel::NumTrainableParameters() const {
  int64_t n = 0;
  for (const Parameter& p : params_) n += p.trainable ? p.numel() : 0;
  return n;
}

Status LlamaModel::SetTrainable(const std::string& name, bool trainable) {
  Parameter* p = FindParameter(name);
  if (p == nullptr) return NotFound("SetTrainable: the model has no parameter '" + name + "'");
  if (p->trainable == trainable) return Status::Ok();
  p->trainable = trainable;
  ParamGroup& g = units_[static_cast<size_t>(p->unit)];
  g.grads.reset();  // laid out again without (or with) it by EnsureGradients
  g.grads_view = View();
  g.trainable_numel = 0;
  for (Parameter* q : g.params) q->grad = View();
  return Status::Ok();
}

void LlamaModel::ReleaseUnitStorage(int unit) {
  ParamGroup& g = units_[static_cast<size_t>(unit)];
  g.trainable_numel = 0;
  for (Parameter* p : g.params) {
    g.trainable_numel += p->trainable ? p->numel() : 0;
    p->value = View();
    p->grad = View();
  }
  g.values.reset();
  g.grads.reset();
  g.values_view = View();
  g.grads_view = View();
  g.external = true;
}

void LlamaModel::BindUnit(int unit, const View& values, const View& grads) {
  ParamGroup& g = units_[static_cast<size_t>(unit)];
  g.values_view = values;
  g.grads_view = grads;
  int64_t offset = 0, grad_offset = 0;
  for (Parameter* p : g.params) {
    p->value =
        View(values.buffer(), values.byte_offset() + static_cast<size_t>(offset) * sizeof(float),
             DType::kF32, p->shape);
    offset += p->numel();
    if (p->trainable && !grads.empty()) {
      p->grad = View(grads.buffer(),
                     grads.byte_offset() + static_cast<size_t>(grad_offset) * sizeof(float),
                     DType::kF32, p->shape);
      grad_offset += p->numel();
    } else {
      p->grad = View();
    }
  }
}

Status LlamaModel::EnsureGradients() {
  const Backend& backend = *backend_;
  for (ParamGroup& g : units_) {
    if (g.grads != nullptr || g.external) continue;
    g.trainable_numel = 0;
    for (const Parameter* p : g.params) g.trainable_numel += p->trainable ? p->numel() : 0;
    if (g.trainable_numel == 0) continue;
    AIR_ASSIGN_OR_RETURN(g.grads,
                         backend.AllocateView(DType::kF32, {g.trainable_numel}, &g.grads_view));
    backend.Zero(g.grads_view);
    int64_t offset = 0;
    for (Parameter* p : g.params) {
      if (!p->trainable) continue;
      p->grad =
          View(g.grads.get(), static_cast<size_t>(offset) * sizeof(float), DType::kF32, p->shape);
      offset += p->numel();
    }
  }
  return Status::Ok();
}

Status LlamaModel::ZeroGrads() {
  AIR_RETURN_IF_ERROR(EnsureGradients());
  for (ParamGroup& g : units_) {
    if (!g.grads_view.empty() && !g.external) backend_->Zero(g.grads_view);
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
  const int64_t pad = config_.pad_token_id;
  std::vector<float> host;  // initialization is not the step loop: draw on the host, upload
  for (Parameter& p : params_) {
    const bool is_norm = p.name.find("norm.weight") != std::string::npos;
    const bool is_bias = p.name.ends_with(".bias");
    host.assign(static_cast<size_t>(p.numel()), 0.0f);
    if (is_norm) {
      std::fill(host.begin(), host.end(), 1.0f);
    } else if (!is_bias) {
      for (float& v : host) v = static_cast<float>(stddev * normal());
    }
    // nn.Embedding(padding_idx) starts with the padding row at zero, as HF initializes it.
    if (&p == impl_->embed && pad >= 0 && pad < config_.vocab_size) {
      std::fill(host.begin() + pad * config_.hidden_size,
                host.begin() + (pad + 1) * config_.hidden_size, 0.0f);
    }
    backend_->CopyToDevice(p.value, host.data());
  }
}

Result<KvCache> LlamaModel::NewKvCache(int64_t batch, int64_t capacity) const {
  KvCache cache;
  cache.batch = batch;
  cache.capacity = capacity;
  const Shape shape{batch, capacity, config_.num_kv_heads, config_.head_dim};
  const size_t layer_bytes = static_cast<size_t>(NumElements(shape)) * sizeof(float);
  const auto layers = static_cast<size_t>(config_.num_layers);
  AIR_ASSIGN_OR_RETURN(cache.storage, backend_->Allocate(2 * layers * layer_bytes));
  for (size_t l = 0; l < layers; ++l) {
    cache.keys.emplace_back(cache.storage.get(), 2 * l * layer_bytes, DType::kF32, shape);
    cache.values.emplace_back(cache.storage.get(), (2 * l + 1) * layer_bytes, DType::kF32, shape);
  }
  return cache;
}

}  // namespace air::engine
