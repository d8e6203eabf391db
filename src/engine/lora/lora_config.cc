// Which linear layers get adapters and which parameters are trained whole (see lora_config.h).
#include "engine/lora/lora_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "base/strings.h"
#include "engine/data/regex.h"
#include "engine/io/state_dict_adapter.h"

namespace air::engine::lora {
namespace {

bool EndsWithModule(const std::string& path, const std::string& name) {
  return path == name || path.ends_with("." + name);
}

// PEFT's check that a module lies inside a modules_to_save one: (^|.*\.){m}($|\..*).
bool InsideModule(const std::string& path, const std::string& m) {
  const std::string dotted = "." + path + ".";
  return dotted.find("." + m + ".") != std::string::npos;
}

// The distinct last components of `paths` ("q_proj, k_proj, ..."), in first-seen order; layer
// indices ("model.layers.0") are not names.
std::string ShortNames(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const std::string& p : paths) {
    const std::string leaf = p.substr(p.rfind('.') + 1);
    const bool index =
        std::all_of(leaf.begin(), leaf.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    if (index || std::find(names.begin(), names.end(), leaf) != names.end()) continue;
    names.push_back(leaf);
  }
  return Join(names, ", ");
}

std::string ModuleOf(const std::string& hf_param) {
  return hf_param.substr(0, hf_param.rfind('.'));
}

// "model.layers.0.mlp.experts.gate_up_proj" -> "mlp.experts.gate_up_proj" (the path inside a
// layer; a path without a layer index is kept).
std::string InLayer(const std::string& path) {
  size_t start = 0;
  while (start < path.size()) {
    const size_t dot = path.find('.', start);
    if (dot == std::string::npos) break;
    const std::string piece = path.substr(start, dot - start);
    const bool index =
        !piece.empty() && std::all_of(piece.begin(), piece.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
    if (index) return path.substr(dot + 1);
    start = dot + 1;
  }
  return path;
}

bool MatchesParameter(const std::string& path, const std::string& entry) {
  return path == entry || path.ends_with("." + entry);  // PEFT's _inject_parameters
}

// PEFT's target_parameters over the model's per-expert weights (lora_config.h).
Status PlanParameterTargets(const LoraConfig& config, CausalLm& model, const WhereFn& where,
                            LoraPlan& plan) {
  if (config.target_parameters.empty()) return Status::Ok();
  if (config.dropout != 0.0) {
    return InvalidArgument(fmt::format(
        "{}: {} with lora_target_parameters: PEFT's LoRA on parameters (its ParamWrapper) does "
        "not work with lora_dropout != 0 (dropout cannot act on the input inside a weight); set "
        "lora_dropout: 0",
        where("lora_dropout"), config.dropout));
  }
  const auto adapter = StateDictAdapterFor(model.config());
  const std::vector<NamedExpertLinear> experts = model.ExpertLinears();
  if (experts.empty()) {
    return InvalidArgument(fmt::format(
        "{}: this model ({}) has no per-expert weights; air adapts parameters (PEFT's "
        "target_parameters) only for a mixture of experts' weights (GPT-OSS's "
        "mlp.experts.gate_up_proj and mlp.experts.down_proj): adapt its linear layers with "
        "lora_target_modules",
        where("lora_target_parameters"), ArchitectureClassName(model.config().arch)));
  }
  std::vector<std::string> paths, names;
  for (const NamedExpertLinear& e : experts) {
    paths.push_back(adapter->ToHf(e.parameter));
    if (std::find(names.begin(), names.end(), InLayer(paths.back())) == names.end()) {
      names.push_back(InLayer(paths.back()));
    }
  }
  const std::string valid = fmt::format(
      "the parameters LoRA on parameters adapts are the expert weights {} ({} and so on)",
      Join(names, ", "), paths.front());
  std::vector<bool> chosen(experts.size(), false);
  for (const std::string& entry : config.target_parameters) {
    bool any = false;
    for (size_t i = 0; i < experts.size(); ++i) {
      if (MatchesParameter(paths[i], entry)) chosen[i] = any = true;
    }
    if (any) continue;
    for (const Parameter& p : model.parameters()) {
      const std::string hf = adapter->ToHf(p.name);
      if (MatchesParameter(hf, entry)) {
        return InvalidArgument(
            fmt::format("{}: '{}' names {}, which air does not adapt as a parameter; {}",
                        where("lora_target_parameters"), entry, hf, valid));
      }
    }
    return InvalidArgument(fmt::format("{}: '{}' matches no parameter of the model; {}",
                                       where("lora_target_parameters"), entry, valid));
  }
  // PEFT wraps a module's parameters in the module's order, each wrapper around the previous
  // one: the first chosen is the innermost ("<module>.base_layer" once per wrapper outside it).
  for (size_t i = 0; i < experts.size(); ++i) {
    if (!chosen[i]) continue;
    const std::string module = ModuleOf(experts[i].parameter);
    std::string wrapped = module;
    for (size_t j = i + 1; j < experts.size(); ++j) {
      if (chosen[j] && ModuleOf(experts[j].parameter) == module) wrapped += ".base_layer";
    }
    const Parameter& w = *experts[i].linear->weight;
    plan.parameter_targets.push_back(
        {experts[i].parameter, paths[i], wrapped, w.layer, w.shape[0], w.shape[1], w.shape[2]});
  }
  return Status::Ok();
}

}  // namespace

float LoraConfig::Scaling() const {
  const double r_term = use_rslora ? std::sqrt(static_cast<double>(r)) : static_cast<double>(r);
  return static_cast<float>(alpha / r_term);
}

std::vector<std::string> HfLinearModules(CausalLm& model) {
  const auto adapter = StateDictAdapterFor(model.config());
  std::vector<std::string> out;
  for (const NamedLinear& l : model.Linears())
    out.push_back(ModuleOf(adapter->ToHf(l.module + ".weight")));
  return out;
}

std::vector<std::string> HfModulePaths(const CausalLm& model) {
  const auto adapter = StateDictAdapterFor(model.config());
  std::set<std::string> seen;
  std::vector<std::string> out;
  for (const Parameter& p : model.parameters()) {
    std::string module = ModuleOf(adapter->ToHf(p.name));
    while (!module.empty() && seen.insert(module).second) {
      out.push_back(module);
      const size_t dot = module.rfind('.');
      module = dot == std::string::npos ? "" : module.substr(0, dot);
    }
  }
  return out;
}

Result<LoraPlan> PlanLora(const LoraConfig& config, CausalLm& model, const WhereFn& where) {
  if (config.r < 1) {
    return InvalidArgument(
        fmt::format("{}: {} is out of range: the rank must be >= 1", where("lora_r"), config.r));
  }
  const auto adapter = StateDictAdapterFor(model.config());
  const std::vector<NamedLinear> linears = model.Linears();
  if (linears.empty()) {
    return InvalidArgument(fmt::format(
        "{}: LoRA adapts a model's linear layers; this model ({}) has none it can adapt",
        where("use_peft"), ArchitectureClassName(model.config().arch)));
  }
  const std::vector<std::string> linear_paths = HfLinearModules(model);
  const std::vector<std::string> modules = HfModulePaths(model);
  auto is_linear = [&](const std::string& path) {
    return std::find(linear_paths.begin(), linear_paths.end(), path) != linear_paths.end();
  };
  LoraPlan plan;

  // modules_to_save: trained whole (PEFT: key.endswith(entry)).
  std::vector<std::string> saved_modules;
  for (const std::string& m : config.modules_to_save) {
    std::vector<std::string> hits;
    for (const std::string& path : modules) {
      if (path.ends_with(m)) hits.push_back(path);
    }
    if (hits.empty()) {
      return InvalidArgument(fmt::format(
          "{}: '{}' matches no module of the model; its modules are {} (for example {})",
          where("lora_modules_to_save"), m, ShortNames(modules),
          Join(std::vector<std::string>(modules.begin(),
                                        modules.begin() + std::min<size_t>(3, modules.size())),
               ", ")));
    }
    saved_modules.insert(saved_modules.end(), hits.begin(), hits.end());
  }
  for (const Parameter& p : model.parameters()) {
    const std::string hf = adapter->ToHf(p.name);
    for (const std::string& m : saved_modules) {
      if (hf.rfind(m + ".", 0) != 0) continue;
      if (model.config().tie_word_embeddings && p.name == "tok_embeddings.weight") {
        return InvalidArgument(fmt::format(
            "{}: {} is the embedding, which this model ties to its output head "
            "(tie_word_embeddings); PEFT would train a separate copy and untie them — train it "
            "with LoRA targets instead, or use a model with untied embeddings",
            where("lora_modules_to_save"), m));
      }
      plan.trained_whole.push_back(p.name);
      break;
    }
  }
  auto saved = [&](const std::string& path) {
    for (const std::string& m : config.modules_to_save) {
      if (InsideModule(path, m)) return true;
    }
    return false;
  };

  // target_modules.
  std::vector<bool> chosen(linears.size(), false);
  const std::string linear_list = fmt::format(
      "the linear layers are {} ({} and so on; the output head lm_head is not one LoRA adapts: "
      "train it whole with lora_modules_to_save)",
      ShortNames(linear_paths), linear_paths.empty() ? "" : linear_paths.front());
  auto not_linear = [&](const std::string& entry, const std::string& path) {
    return InvalidArgument(fmt::format("{}: '{}' names {}, which is not a linear layer; {}",
                                       where("lora_target_modules"), entry, path, linear_list));
  };
  AIR_RETURN_IF_ERROR(PlanParameterTargets(config, model, where, plan));
  TargetModules targets = config.targets;
  const bool parameters_only =
      targets.kind == TargetModules::Kind::kDefault && !plan.parameter_targets.empty();
  if (targets.kind == TargetModules::Kind::kDefault && !parameters_only) {
    if (model.config().arch == Architecture::kGptOss) {
      // PEFT has no default target_modules for gpt_oss ("Please specify `target_modules`").
      return InvalidArgument(fmt::format(
          "{}: PEFT has no default target modules for {}; name them: all-linear, or a list of "
          "{} (or give lora_target_parameters alone)",
          where("lora_target_modules"), ArchitectureClassName(model.config().arch),
          ShortNames(linear_paths)));
    }
    targets.kind = TargetModules::Kind::kNames;  // PEFT's default for these architectures
    targets.names = {"q_proj", "v_proj"};
  }
  switch (targets.kind) {
    case TargetModules::Kind::kAllLinear:
      std::fill(chosen.begin(), chosen.end(), true);
      break;
    case TargetModules::Kind::kNames:
      for (const std::string& name : targets.names) {
        bool any = false;
        for (size_t i = 0; i < linears.size(); ++i) {
          if (EndsWithModule(linear_paths[i], name)) chosen[i] = any = true;
        }
        if (any) continue;
        for (const std::string& path : modules) {
          if (EndsWithModule(path, name)) return not_linear(name, path);
        }
        return InvalidArgument(fmt::format("{}: '{}' matches no module of the model; {}",
                                           where("lora_target_modules"), name, linear_list));
      }
      break;
    case TargetModules::Kind::kRegex: {
      AIR_ASSIGN_OR_RETURN(Regex re, Regex::Compile("\\A(?:" + targets.pattern + ")\\z",
                                                    where("lora_target_modules")));
      bool any = false;
      for (const std::string& path : modules) {
        AIR_ASSIGN_OR_RETURN(bool hit, re.Search(path));
        if (!hit) continue;
        if (!is_linear(path)) return not_linear(targets.pattern, path);
        for (size_t i = 0; i < linears.size(); ++i) {
          if (linear_paths[i] == path) chosen[i] = any = true;
        }
      }
      if (!any) {
        return InvalidArgument(fmt::format(
            "{}: the regular expression '{}' matches no module path whole (re.fullmatch, as PEFT); "
            "{}",
            where("lora_target_modules"), targets.pattern, linear_list));
      }
      break;
    }
    case TargetModules::Kind::kDefault:
      break;
  }
  for (size_t i = 0; i < linears.size(); ++i) {
    if (!chosen[i] || saved(linear_paths[i])) continue;
    const Parameter& w = *linears[i].linear->weight;
    plan.targets.push_back({linears[i].module, linear_paths[i], w.layer, w.shape[1], w.shape[0]});
  }
  if (plan.targets.empty() && plan.parameter_targets.empty()) {
    return InvalidArgument(fmt::format(
        "{}: every targeted linear layer lies inside lora_modules_to_save; nothing gets an adapter",
        where("lora_target_modules")));
  }
  if (targets.kind == TargetModules::Kind::kAllLinear) {
    for (const LoraTarget& t : plan.targets) plan.target_names.push_back(t.hf_module);
  } else if (targets.kind == TargetModules::Kind::kNames) {
    plan.target_names = targets.names;
  } else if (targets.kind == TargetModules::Kind::kRegex) {
    plan.target_names = {targets.pattern};
  }
  std::sort(plan.target_names.begin(), plan.target_names.end());
  plan.target_names.erase(std::unique(plan.target_names.begin(), plan.target_names.end()),
                          plan.target_names.end());
  return plan;
}

}  // namespace air::engine::lora
