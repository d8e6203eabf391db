// LoRA applied to a model from outside (see lora_model.h).
#include "engine/lora/lora_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace air::engine::lora {

std::string LoraAName(const std::string& module) { return module + ".lora_A.weight"; }
std::string LoraBName(const std::string& module) { return module + ".lora_B.weight"; }

ParameterFilter BaseWeightsOnly() {
  return [](const Parameter& p) { return !Lora::IsAdapterParameter(p.name); };
}

bool Lora::IsAdapterParameter(const std::string& name) {
  return name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight");
}

Lora::~Lora() {
  // The model must not call into adapters that are gone.
  for (const NamedLinear& l : model_->Linears()) l.linear->adapter = nullptr;
}

Result<std::unique_ptr<Lora>> Lora::Apply(CausalLm& model, const LoraConfig& config,
                                          const LoraPlan& plan) {
  std::unique_ptr<Lora> lora(new Lora(model, config, plan));
  // 1. The base is frozen except what is trained whole.
  for (const Parameter& p : model.parameters()) {
    const bool whole = std::find(plan.trained_whole.begin(), plan.trained_whole.end(), p.name) !=
                       plan.trained_whole.end();
    AIR_RETURN_IF_ERROR(model.SetTrainable(p.name, whole));
  }
  // 2. The adapters' parameters, in their layers' units.
  std::vector<ParameterSpec> specs;
  int64_t max_in = 0;
  for (const LoraTarget& t : plan.targets) {
    specs.push_back({LoraAName(t.module), {config.r, t.in}, t.layer, true});
    specs.push_back({LoraBName(t.module), {t.out, config.r}, t.layer, true});
    max_in = std::max(max_in, t.in);
  }
  AIR_RETURN_IF_ERROR(model.AddParameters(std::move(specs)));
  // 3. One LoraLinear per target, attached to the (renewed) descriptors.
  lora->scratch_ = std::make_unique<LoraScratch>(&model.backend(), config.r, max_in,
                                                 static_cast<int>(plan.targets.size()));
  std::vector<NamedLinear> linears = model.Linears();
  for (size_t i = 0; i < plan.targets.size(); ++i) {
    const LoraTarget& t = plan.targets[i];
    auto it = std::find_if(linears.begin(), linears.end(),
                           [&](const NamedLinear& l) { return l.module == t.module; });
    if (it == linears.end()) return Internal("LoRA target " + t.module + " is not a linear layer");
    auto adapter = std::make_unique<LoraLinear>(
        model.FindParameter(LoraAName(t.module)), model.FindParameter(LoraBName(t.module)),
        config.Scaling(), static_cast<float>(config.dropout), static_cast<int>(i),
        lora->scratch_.get());
    it->linear->adapter = adapter.get();
    lora->adapters_.push_back(std::move(adapter));
  }
  return lora;
}

bool Lora::InAdapter(const std::string& name) const {
  return IsAdapterParameter(name) ||
         std::find(plan_.trained_whole.begin(), plan_.trained_whole.end(), name) !=
             plan_.trained_whole.end();
}

int64_t Lora::NumAdapterParameters() const {
  int64_t n = 0;
  for (const auto& a : adapters_) n += a->a()->numel() + a->b()->numel();
  return n;
}

void Lora::InitializeUnit(int unit, uint64_t seed) const {
  const Backend& backend = model_->backend();
  std::vector<float> host;
  for (size_t i = 0; i < adapters_.size(); ++i) {
    const Parameter& a = *adapters_[i]->a();
    if (a.unit != unit) continue;
    // nn.init.kaiming_uniform_(A, a=sqrt(5)): bound = gain * sqrt(3 / fan_in) with
    // gain = sqrt(2 / (1 + 5)), i.e. 1 / sqrt(in).
    const double bound = 1.0 / std::sqrt(static_cast<double>(a.shape[1]));
    std::mt19937_64 rng(seed ^ (0x9E3779B97F4A7C15ull * (i + 1)));
    host.resize(static_cast<size_t>(a.numel()));
    for (float& v : host) {
      const double u = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;  // (0, 1)
      v = static_cast<float>((2.0 * u - 1.0) * bound);
    }
    backend.FromHostTensor(a.value, host.data());
    backend.Zero(adapters_[i]->b()->value);
  }
}

}  // namespace air::engine::lora
