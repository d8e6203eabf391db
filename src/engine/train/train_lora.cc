// LoRA's part of air train's stages (see train_lora.h).
#include "engine/train/train_lora.h"

#include <fmt/format.h>

#include <filesystem>

#include "base/strings.h"
#include "engine/backend/registry.h"
#include "engine/io/hf_hub.h"
#include "engine/model/model_factory.h"
#include "engine/train/train_run.h"

namespace air::engine::train {
namespace {

// The module paths a plan targets, for comparing two settings.
std::vector<std::string> Targets(const lora::LoraPlan& plan) {
  std::vector<std::string> out;
  for (const lora::LoraTarget& t : plan.targets) out.push_back(t.hf_module);
  return out;
}

// Takes the adapter's settings; a key given in the parameters as well must agree.
Status MergeAdapterConfig(const TrainConfig& c, const lora::PeftAdapterConfig& adapter,
                          const std::string& file, CausalLm& model, lora::LoraConfig& out) {
  const lora::LoraConfig& given = c.lora;
  const lora::LoraConfig& theirs = adapter.lora;
  auto differs = [&](const char* key, const std::string& ours, const std::string& saved) {
    return InvalidArgument(fmt::format(
        "{}: {} but the starting adapter says {} ({}); the adapter decides its own settings: "
        "remove the key or make it agree",
        c.Where(key), ours, saved, file));
  };
  const auto given_key = [&](const char* key) { return c.sources.count(key) > 0; };
  if (given_key("lora_r") && given.r != theirs.r) {
    return differs("lora_r", std::to_string(given.r), fmt::format("r {}", theirs.r));
  }
  if (given_key("lora_alpha") && given.alpha != theirs.alpha) {
    return differs("lora_alpha", fmt::format("{}", given.alpha),
                   fmt::format("lora_alpha {}", theirs.alpha));
  }
  if (given_key("lora_dropout") && given.dropout != theirs.dropout) {
    return differs("lora_dropout", fmt::format("{}", given.dropout),
                   fmt::format("lora_dropout {}", theirs.dropout));
  }
  if (given_key("use_rslora") && given.use_rslora != theirs.use_rslora) {
    return differs("use_rslora", given.use_rslora ? "true" : "false",
                   theirs.use_rslora ? "use_rslora true" : "use_rslora false");
  }
  if (given_key("lora_modules_to_save") && given.modules_to_save != theirs.modules_to_save) {
    return differs("lora_modules_to_save", "[" + Join(given.modules_to_save, ", ") + "]",
                   "modules_to_save [" + Join(theirs.modules_to_save, ", ") + "]");
  }
  if (given_key("lora_target_parameters") && given.target_parameters != theirs.target_parameters) {
    return differs("lora_target_parameters", "[" + Join(given.target_parameters, ", ") + "]",
                   "target_parameters [" + Join(theirs.target_parameters, ", ") + "]");
  }
  const auto where = [&](const std::string& key) { return c.Where(key); };
  if (given_key("lora_target_modules")) {
    AIR_ASSIGN_OR_RETURN(lora::LoraPlan mine, lora::PlanLora(given, model, where));
    AIR_ASSIGN_OR_RETURN(lora::LoraPlan saved, lora::PlanLora(theirs, model, where));
    if (Targets(mine) != Targets(saved)) {
      return differs("lora_target_modules", fmt::format("targets {} modules", mine.targets.size()),
                     fmt::format("target_modules covering {} modules", saved.targets.size()));
    }
  }
  out = theirs;
  out.adapter_path = given.adapter_path;
  return Status::Ok();
}

}  // namespace

Status PrepareLora(Env* env, PreparedTraining& p) {
  TrainConfig& c = p.config;
  if (!c.lora.enabled) return Status::Ok();
  // A model without storage (nothing is allocated) to plan on and check the adapter against.
  AIR_ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend, CreateBackend({.kind = "reference"}));
  ModelOptions options;
  options.deferred_storage = true;
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<CausalLm> model,
                       CreateModel(p.model_config, backend, options));
  const int64_t base_parameters = model->NumParameters();
  const auto where = [&](const std::string& key) { return c.Where(key); };
  if (!c.lora.adapter_path.empty()) {
    auto dir = ResolveModelDir(c.lora.adapter_path, env);
    if (!dir.ok()) {
      return Status(dir.status().code(),
                    fmt::format("{}: {}", c.Where("lora_adapter_path"), dir.status().message()));
    }
    p.lora_adapter_dir = *dir;
    auto adapter = lora::ReadPeftAdapterConfig(*dir);
    if (!adapter.ok()) {
      return Status(adapter.status().code(), fmt::format("{}: {}", c.Where("lora_adapter_path"),
                                                         adapter.status().message()));
    }
    AIR_RETURN_IF_ERROR(
        MergeAdapterConfig(c, *adapter, *dir + "/" + lora::kAdapterConfigName, *model, c.lora));
    if (!adapter->base_model_name_or_path.empty()) {
      auto base = ResolveModelDir(adapter->base_model_name_or_path, env);
      std::error_code ec;
      if (!base.ok() || !std::filesystem::equivalent(*base, p.model_dir, ec)) {
        p.notes.push_back(fmt::format(
            "the starting adapter was saved from base model {}, this run's is {}; its tensors "
            "fit this model's shapes",
            adapter->base_model_name_or_path, c.model_name));
      }
    }
  }
  AIR_ASSIGN_OR_RETURN(lora::LoraPlan plan, lora::PlanLora(c.lora, *model, where));
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<lora::Lora> applied,
                       lora::Lora::Apply(*model, c.lora, plan));
  if (!p.lora_adapter_dir.empty()) {
    auto reader = lora::PeftAdapterReader::Open(p.lora_adapter_dir, *model, *applied);
    if (!reader.ok()) {
      return Status(reader.status().code(),
                    fmt::format("{}: {}", c.Where("lora_adapter_path"), reader.status().message()));
    }
  }
  for (const ParamGroup& unit : model->units()) {
    fsdp::UnitSize& size = p.lora_units.emplace_back();
    for (const Parameter* param : unit.params) {
      (param->trainable ? size.trainable : size.frozen) += param->numel();
    }
  }
  p.lora_scratch_bytes = static_cast<double>(applied->ReserveBytes(
      int64_t{c.per_device_batch_size} * c.max_seq_len, c.precision.param_dtype));
  const int64_t adapters = applied->NumAdapterParameters();
  int64_t whole = 0;
  for (const std::string& name : plan.trained_whole) whole += model->FindParameter(name)->numel();
  p.lora_trainable_fraction =
      static_cast<double>(adapters + whole) / static_cast<double>(base_parameters);
  std::string targets;
  switch (c.lora.targets.kind) {
    case lora::TargetModules::Kind::kAllLinear:
      targets = "all-linear";
      break;
    case lora::TargetModules::Kind::kRegex:
      targets = "'" + c.lora.targets.pattern + "'";
      break;
    default:
      targets = Join(plan.target_names, ", ");
  }
  if (!c.lora.target_parameters.empty()) {
    targets =
        fmt::format("{}{}target parameters {}", plan.target_names.empty() ? "" : targets,
                    plan.target_names.empty() ? "" : " + ", Join(c.lora.target_parameters, ", "));
  }
  p.lora_description = fmt::format(
      "r {}, alpha {} (scaling {:g}{}), dropout {}, targets {}: {} linear layers{}, {} adapter "
      "parameters{}; {:.2f}% of {} trained, the base frozen{}",
      c.lora.r, c.lora.alpha, c.lora.Scaling(), c.lora.use_rslora ? ", rslora" : "", c.lora.dropout,
      targets, plan.targets.size(),
      plan.parameter_targets.empty()
          ? ""
          : fmt::format(" and {} expert weights", plan.parameter_targets.size()),
      adapters,
      whole > 0 ? fmt::format(" + {} trained whole ({})", whole, Join(c.lora.modules_to_save, ", "))
                : "",
      100.0 * p.lora_trainable_fraction, base_parameters,
      p.lora_adapter_dir.empty() ? "" : "; starting from " + p.lora_adapter_dir);
  return Status::Ok();
}

Status LoraSetup::LoadUnitAdapters(CausalLm& model, int unit, uint64_t seed) const {
  if (start != nullptr) return start->LoadUnit(model, *lora, unit);
  lora->InitializeUnit(unit, seed);
  return Status::Ok();
}

Result<LoraSetup> ApplyLora(const PreparedTraining& p, CausalLm& model) {
  const TrainConfig& c = p.config;
  LoraSetup setup;
  if (!c.lora.enabled) return setup;
  const auto where = [&](const std::string& key) { return c.Where(key); };
  AIR_ASSIGN_OR_RETURN(lora::LoraPlan plan, lora::PlanLora(c.lora, model, where));
  AIR_ASSIGN_OR_RETURN(setup.lora, lora::Lora::Apply(model, c.lora, plan));
  AIR_RETURN_IF_ERROR(setup.lora->Reserve(
      static_cast<int64_t>(c.per_device_batch_size) * c.max_seq_len, c.precision.param_dtype));
  if (!p.lora_adapter_dir.empty()) {
    AIR_ASSIGN_OR_RETURN(setup.start,
                         lora::PeftAdapterReader::Open(p.lora_adapter_dir, model, *setup.lora));
  }
  return setup;
}

}  // namespace air::engine::train
