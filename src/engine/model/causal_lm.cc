// CausalLm's storage half: parameters, units, their buffers and bindings (see causal_lm.h and
// parameter.h for the two-segment unit layout).
#include "engine/model/causal_lm.h"

#include <set>

namespace air::engine {

namespace {

// frozen_numel and trainable_numel from the parameters' flags.
void CountSegments(ParamGroup& g) {
  g.frozen_numel = 0;
  g.trainable_numel = 0;
  for (const Parameter* p : g.params)
    (p->trainable ? g.trainable_numel : g.frozen_numel) += p->numel();
}

}  // namespace

CausalLm::CausalLm(ModelConfig config, std::shared_ptr<Backend> backend, ModelOptions options)
    : config_(std::move(config)), options_(options), backend_(std::move(backend)) {}

CausalLm::~CausalLm() = default;

Status CausalLm::BuildParameters(std::vector<ParameterSpec> specs) {
  // The vector is filled once per build and never resized: layer weights and units keep
  // pointers into it.
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
    p.trainable = spec.trainable;
    params_.push_back(std::move(p));
  }
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
  for (ParamGroup& g : units_) CountSegments(g);
  if (!options_.deferred_storage) {
    for (int u = 0; u <= root; ++u) AIR_RETURN_IF_ERROR(AllocateUnitStorage(u));
  }
  return Status::Ok();
}

Status CausalLm::AddParameters(std::vector<ParameterSpec> specs) {
  for (const ParamGroup& g : units_) {
    if (g.values != nullptr || g.external) {
      return FailedPrecondition("AddParameters: unit " + g.name +
                                " already has storage; add parameters to a model created with "
                                "deferred storage, before any unit is allocated");
    }
  }
  std::set<std::string> names;
  std::vector<ParameterSpec> all;
  for (const Parameter& p : params_) {
    names.insert(p.name);
    all.push_back({p.name, p.shape, p.layer, p.trainable});
  }
  const int layers = root_unit();
  for (ParameterSpec& spec : specs) {
    if (!names.insert(spec.name).second) {
      return InvalidArgument("AddParameters: the model already has a parameter '" + spec.name +
                             "'");
    }
    if (spec.layer < -1 || spec.layer >= layers) {
      return InvalidArgument("AddParameters: " + spec.name + " names layer " +
                             std::to_string(spec.layer) + "; the model has " +
                             std::to_string(layers));
    }
    all.push_back(std::move(spec));
  }
  const bool deferred = options_.deferred_storage;
  options_.deferred_storage = true;
  Status built = BuildParameters(std::move(all));
  options_.deferred_storage = deferred;
  AIR_RETURN_IF_ERROR(built);
  if (static_cast<int>(units_.size()) != layers + 1) {
    return Internal("AddParameters: the rebuilt model has another number of units");
  }
  FindWeights();
  MarkOverwrittenGradients();
  return Status::Ok();
}

void CausalLm::MarkOverwrittenGradients() {
  for (Parameter& p : params_) p.grad_overwrites = false;
  for (const NamedLinear& l : Linears()) l.linear->weight->grad_overwrites = true;
  // Tied, the head is the embedding, whose backward adds into its gradient.
  if (Parameter* head = FindParameter("output.weight")) head->grad_overwrites = true;
}

void CausalLm::ZeroUnitGradients(int unit, const View& grads) const {
  const ParamGroup& g = units_[static_cast<size_t>(unit)];
  if (grads.empty()) return;
  // The trainable segment's runs to zero: everything but the overwritten gradients.
  int64_t offset = 0, run_start = 0;
  for (Parameter* p : g.params) {
    if (!p->trainable) continue;
    if (p->grad_overwrites) {
      if (offset > run_start) backend_->Zero(grads.Slice(run_start, offset - run_start));
      run_start = offset + p->numel();
      p->grad_unwritten = true;
    }
    offset += p->numel();
  }
  if (grads.numel() > run_start) backend_->Zero(grads.Slice(run_start, grads.numel() - run_start));
}

void CausalLm::FinishUnitGradients(int unit) const {
  for (Parameter* p : units_[static_cast<size_t>(unit)].params) {
    if (!p->grad_unwritten) continue;
    if (!p->grad.empty()) backend_->Zero(p->grad);
    p->grad_unwritten = false;
  }
}

Status CausalLm::AllocateUnitStorage(int unit) {
  ParamGroup& g = units_[static_cast<size_t>(unit)];
  if (g.values != nullptr) return FailedPrecondition(g.name + " already has its storage");
  AIR_ASSIGN_OR_RETURN(g.values, backend_->AllocateView(DType::kF32, {g.numel}, &g.values_view));
  backend_->Zero(g.values_view);
  g.external = false;
  BindUnit(unit, g.values_view.Slice(0, g.frozen_numel),
           g.values_view.Slice(g.frozen_numel, g.trainable_numel), View());
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
  ParamGroup& g = units_[static_cast<size_t>(p->unit)];
  if (g.external) {
    return FailedPrecondition("SetTrainable(" + name + "): the storage of " + g.name +
                              " is bound from outside (FSDP); set trainability before");
  }
  // The parameter moves to the other segment: with storage, copy every value to its new place.
  std::vector<View> old_values;
  for (const Parameter* q : g.params) old_values.push_back(q->value);
  p->trainable = trainable;
  CountSegments(g);
  g.grads.reset();  // laid out again without (or with) it by EnsureGradients
  g.grads_view = View();
  for (Parameter* q : g.params) q->grad = View();
  if (g.values == nullptr) return Status::Ok();
  std::unique_ptr<Buffer> old = std::move(g.values);
  AIR_ASSIGN_OR_RETURN(g.values, backend_->AllocateView(DType::kF32, {g.numel}, &g.values_view));
  BindUnit(p->unit, g.values_view.Slice(0, g.frozen_numel),
           g.values_view.Slice(g.frozen_numel, g.trainable_numel), View());
  for (size_t i = 0; i < g.params.size(); ++i) backend_->Copy(g.params[i]->value, old_values[i]);
  return Status::Ok();
}

void CausalLm::ReleaseUnitStorage(int unit) {
  ParamGroup& g = units_[static_cast<size_t>(unit)];
  CountSegments(g);
  for (Parameter* p : g.params) {
    p->value = View();
    p->grad = View();
  }
  g.values.reset();
  g.grads.reset();
  g.values_view = View();
  g.frozen_view = View();
  g.trainable_view = View();
  g.grads_view = View();
  g.external = true;
}

void CausalLm::BindUnit(int unit, const View& frozen, const View& trainable, const View& grads) {
  ParamGroup& g = units_[static_cast<size_t>(unit)];
  g.frozen_view = frozen;
  g.trainable_view = trainable;
  g.grads_view = grads;
  int64_t frozen_offset = 0, trainable_offset = 0;
  for (Parameter* p : g.params) {
    const View& segment = p->trainable ? trainable : frozen;
    int64_t& offset = p->trainable ? trainable_offset : frozen_offset;
    p->value =
        segment.empty()
            ? View()
            : View(segment.buffer(),
                   segment.byte_offset() + static_cast<size_t>(offset) * DTypeSize(segment.dtype()),
                   segment.dtype(), p->shape);
    p->grad =
        p->trainable && !grads.empty()
            ? View(grads.buffer(),
                   grads.byte_offset() + static_cast<size_t>(offset) * DTypeSize(grads.dtype()),
                   grads.dtype(), p->shape)
            : View();
    offset += p->numel();
  }
}

Status CausalLm::EnsureGradients() {
  for (ParamGroup& g : units_) {
    if (g.grads != nullptr || g.external) continue;
    CountSegments(g);
    if (g.trainable_numel == 0) continue;
    AIR_ASSIGN_OR_RETURN(g.grads,
                         backend_->AllocateView(DType::kF32, {g.trainable_numel}, &g.grads_view));
    backend_->Zero(g.grads_view);
    BindUnit(static_cast<int>(&g - units_.data()), g.frozen_view, g.trainable_view, g.grads_view);
    for (Parameter* p : g.params) p->grad_unwritten = false;  // zeroed whole
  }
  return Status::Ok();
}

Status CausalLm::ZeroGrads() {
  AIR_RETURN_IF_ERROR(EnsureGradients());
  for (ParamGroup& g : units_) {
    if (!g.grads_view.empty() && !g.external) {
      ZeroUnitGradients(static_cast<int>(&g - units_.data()), g.grads_view);
    }
  }
  return Status::Ok();
}

}  // namespace air::engine
