// LoRA applied to a model from outside (see lora_model.h).
#include "engine/lora/lora_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/model/gpt_oss_config.h"

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
  for (const NamedExpertLinear& l : model_->ExpertLinears()) l.linear->adapter = nullptr;
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
  for (const LoraTarget& t : plan.targets) {
    specs.push_back({LoraAName(t.module), {config.r, t.in}, t.layer, true});
    specs.push_back({LoraBName(t.module), {t.out, config.r}, t.layer, true});
  }
  for (const LoraParameterTarget& t : plan.parameter_targets) {
    specs.push_back({LoraAName(t.module), {t.experts * config.r, t.in}, t.layer, true});
    specs.push_back({LoraBName(t.module), {t.experts, t.out, config.r}, t.layer, true});
  }
  AIR_RETURN_IF_ERROR(model.AddParameters(std::move(specs)));
  // 3. One LoraLinear per target, attached to the (renewed) descriptors.
  std::vector<int64_t> mask_widths;  // each adapter's dropout mask covers its input
  int64_t widest_out = 0;            // the branches fold into their base products
  for (const LoraTarget& t : plan.targets) {
    mask_widths.push_back(config.dropout > 0 ? t.in : 0);
    widest_out = std::max(widest_out, t.out);
  }
  lora->scratch_ =
      std::make_unique<LoraScratch>(&model.backend(), config.r, mask_widths, widest_out);
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
  // 4. One ExpertLora per target parameter (no dropout: PlanLora refuses it there).
  lora->expert_scratch_ = std::make_unique<LoraScratch>(
      &model.backend(), config.r, std::vector<int64_t>(plan.parameter_targets.size(), 0));
  std::vector<NamedExpertLinear> experts = model.ExpertLinears();
  for (size_t i = 0; i < plan.parameter_targets.size(); ++i) {
    const LoraParameterTarget& t = plan.parameter_targets[i];
    auto it = std::find_if(experts.begin(), experts.end(),
                           [&](const NamedExpertLinear& l) { return l.parameter == t.parameter; });
    if (it == experts.end()) {
      return Internal("LoRA target " + t.parameter + " is not an expert weight");
    }
    auto adapter = std::make_unique<ExpertLora>(
        model.FindParameter(LoraAName(t.module)), model.FindParameter(LoraBName(t.module)),
        config.Scaling(), static_cast<int>(i), lora->expert_scratch_.get());
    it->linear->adapter = adapter.get();
    lora->expert_adapters_.push_back(std::move(adapter));
  }
  return lora;
}

namespace {

// The experts see each token k times (GPT-OSS's experts_per_token: the grouped rows).
int64_t ExpertRowsPerToken(const CausalLm& model) {
  return model.config().gpt_oss ? model.config().gpt_oss->experts_per_token : 1;
}

}  // namespace

Status Lora::Reserve(int64_t rows, DType dtype) {
  AIR_RETURN_IF_ERROR(scratch_->Reserve(rows, dtype));
  if (expert_adapters_.empty()) return Status::Ok();
  return expert_scratch_->Reserve(rows * ExpertRowsPerToken(*model_), dtype);
}

size_t Lora::ReserveBytes(int64_t rows, DType dtype) const {
  size_t bytes = scratch_->PlanBytes(rows, dtype);
  if (expert_adapters_.empty()) return bytes;
  return bytes + expert_scratch_->PlanBytes(rows * ExpertRowsPerToken(*model_), dtype);
}

const Status& Lora::status() const {
  return scratch_->status().ok() ? expert_scratch_->status() : scratch_->status();
}

namespace {

// The expert adapter whose lora_B is `p`, or null.
const ExpertLora* ExpertOfB(const std::vector<std::unique_ptr<ExpertLora>>& experts,
                            const Parameter& p) {
  for (const auto& e : experts) {
    if (e->b()->name == p.name) return e.get();
  }
  return nullptr;
}

// Held (E, out, r) <-> PEFT's (out, r*E) with [e][o][j] at [o][j*E + e].
Tensor PermuteExpertB(const Tensor& from, int64_t experts, int64_t out, int64_t r, bool to_file) {
  Tensor to;
  to.ResizeZeroed(to_file ? Shape{out, r * experts} : Shape{experts, out, r});
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t j = 0; j < r; ++j) {
        const int64_t held = (e * out + o) * r + j, file = o * r * experts + j * experts + e;
        to.data()[to_file ? file : held] = from.data()[to_file ? held : file];
      }
    }
  }
  return to;
}

}  // namespace

Shape Lora::FileShape(const Parameter& p) const {
  if (ExpertOfB(expert_adapters_, p) == nullptr) return p.shape;
  return {p.shape[1], p.shape[2] * p.shape[0]};
}

Tensor Lora::ToFile(const Parameter& p, const Tensor& values) const {
  if (ExpertOfB(expert_adapters_, p) == nullptr) return values;
  return PermuteExpertB(values, p.shape[0], p.shape[1], p.shape[2], true);
}

Tensor Lora::FromFile(const Parameter& p, const Tensor& file) const {
  if (ExpertOfB(expert_adapters_, p) == nullptr) return file;
  return PermuteExpertB(file, p.shape[0], p.shape[1], p.shape[2], false);
}

bool Lora::InAdapter(const std::string& name) const {
  return IsAdapterParameter(name) ||
         std::find(plan_.trained_whole.begin(), plan_.trained_whole.end(), name) !=
             plan_.trained_whole.end();
}

int64_t Lora::NumAdapterParameters() const {
  int64_t n = 0;
  for (const auto& a : adapters_) n += a->a()->numel() + a->b()->numel();
  for (const auto& a : expert_adapters_) n += a->a()->numel() + a->b()->numel();
  return n;
}

void Lora::InitializeUnit(int unit, uint64_t seed) const {
  const Backend& backend = model_->backend();
  std::vector<std::pair<Parameter*, Parameter*>> factors;  // (A, B) of every adapter, in order
  for (const auto& a : adapters_) factors.emplace_back(a->a(), a->b());
  for (const auto& a : expert_adapters_) factors.emplace_back(a->a(), a->b());
  std::vector<float> host;
  for (size_t i = 0; i < factors.size(); ++i) {
    const Parameter& a = *factors[i].first;
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
    backend.Zero(factors[i].second->value);
  }
}

}  // namespace air::engine::lora
