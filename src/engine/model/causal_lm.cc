// CausalLm's storage half: parameters, units, their buffers and bindings (see causal_lm.h).
#include "engine/model/causal_lm.h"

namespace air::engine {

CausalLm::CausalLm(ModelConfig config, std::shared_ptr<Backend> backend, ModelOptions options)
    : config_(std::move(config)), options_(options), backend_(std::move(backend)) {}

CausalLm::~CausalLm() = default;

Status CausalLm::BuildParameters(std::vector<ParameterSpec> specs) {
  // The vector is filled once and never resized: layer weights and units keep pointers into it.
  params_.clear();
  int layers = 0;
  for (const ParameterSpec& spec : specs) layers = std::max(layers, spec.layer + 1);
  const int root = layers;
  for (ParameterSpec& spec : specs) {
    Parameter p;
    p.decay = spec.shape.size() >= 2;  // no weight decay for norms and biases
    p.name = std::move(spec.name);
    p.shape = std::move(spec.shape);
    p.layer = spec.layer;
    p.unit = spec.layer >= 0 ? spec.layer : root;
    params_.push_back(std::move(p));
  }
  // One flat value buffer per unit; each parameter a view at its offset (in model order).
  units_.clear();
  units_.resize(static_cast<size_t>(root) + 1);
  for (int u = 0; u <= root; ++u) {
    units_[u].name = u == root ? "root" : "layers." + std::to_string(u);
  }
  for (Parameter& p : params_) {
    ParamGroup& g = units_[static_cast<size_t>(p.unit)];
    g.params.push_back(&p);
    g.numel += p.numel();
  }
  if (!options_.deferred_storage) {
    for (int u = 0; u <= root; ++u) AIR_RETURN_IF_ERROR(AllocateUnitStorage(u));
  }
  return Status::Ok();
}

Status CausalLm::AllocateUnitStorage(int unit) {
  ParamGroup& g = units_[static_cast<size_t>(unit)];
  if (g.values != nullptr) return FailedPrecondition(g.name + " already has its storage");
  AIR_ASSIGN_OR_RETURN(g.values, backend_->AllocateView(DType::kF32, {g.numel}, &g.values_view));
  backend_->Zero(g.values_view);
  g.external = false;
  BindUnit(unit, g.values_view, View());
  g.external = false;
  for (Parameter* p : g.params) {
    // Norm weights start at one so a freshly created model is usable after loading a partial
    // set in tests; InitWeights and loading overwrite everything anyway.
    if (p->name.ends_with("norm.weight")) backend_->Fill(p->value, 1.0f);
  }
  return Status::Ok();
}

Parameter* CausalLm::FindParameter(const std::string& name) {
  for (Parameter& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const Parameter* CausalLm::FindParameter(const std::string& name) const {
  return const_cast<CausalLm*>(this)->FindParameter(name);
}

int64_t CausalLm::NumParameters() const {
  int64_t n = 0;
  for (const Parameter& p : params_) n += p.numel();
  return n;
}

int64_t CausalLm::NumTrainableParameters() const {
  int64_t n = 0;
  for (const Parameter& p : params_) n += p.trainable ? p.numel() : 0;
  return n;
}

Status CausalLm::SetTrainable(const std::string& name, bool trainable) {
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

void CausalLm::ReleaseUnitStorage(int unit) {
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

void CausalLm::BindUnit(int unit, const View& values, const View& grads) {
  ParamGroup& g = units_[static_cast<size_t>(unit)];
  g.values_view = values;
  g.grads_view = grads;
  const size_t value_size = DTypeSize(values.dtype());
  int64_t offset = 0, grad_offset = 0;
  for (Parameter* p : g.params) {
    p->value =
        values.empty()
            ? View()
            : View(values.buffer(), values.byte_offset() + static_cast<size_t>(offset) * value_size,
                   values.dtype(), p->shape);
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

Status CausalLm::EnsureGradients() {
  for (ParamGroup& g : units_) {
    if (g.grads != nullptr || g.external) continue;
    g.trainable_numel = 0;
    for (const Parameter* p : g.params) g.trainable_numel += p->trainable ? p->numel() : 0;
    if (g.trainable_numel == 0) continue;
    AIR_ASSIGN_OR_RETURN(g.grads,
                         backend_->AllocateView(DType::kF32, {g.trainable_numel}, &g.grads_view));
    backend_->Zero(g.grads_view);
    BindUnit(static_cast<int>(&g - units_.data()), g.values_view, g.grads_view);
  }
  return Status::Ok();
}

Status CausalLm::ZeroGrads() {
  AIR_RETURN_IF_ERROR(EnsureGradients());
  for (ParamGroup& g : units_) {
    if (!g.grads_view.empty() && !g.external) backend_->Zero(g.grads_view);
  }
  return Status::Ok();
}

}  // namespace air::engine
