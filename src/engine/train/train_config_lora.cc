// The LoRA keys of `air train` (TRL's ModelConfig names; see train_config_fields.h and
// engine/lora/lora_config.h for what each means).
#include <fmt/format.h>

#include <cctype>

#include "base/strings.h"
#include "engine/data/regex.h"
#include "engine/train/train_config_fields.h"

namespace air::engine::train::fields {
namespace {

using lora::TargetModules;

// lora_target_modules: "all-linear", a regex (any other string), or a list of module names.
Setter TargetModulesField() {
  return [](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    const char* kName = "lora_target_modules";
    TargetModules t;
    if (g.node.IsSequence()) {
      t.kind = TargetModules::Kind::kNames;
      for (const YamlNode& item : g.node.items) {
        if (!IsText(item) || Trim(item.value).empty()) {
          errors.Add(g.where, kName,
                     fmt::format("expected module names such as q_proj, got {} in the list",
                                 Describe(item)));
          return;
        }
        t.names.push_back(item.value);
      }
      if (t.names.empty()) {
        errors.Add(g.where, kName, "the list is empty; name modules, or give all-linear");
        return;
      }
    } else if (IsText(g.node) && !Trim(g.node.value).empty()) {
      std::string lower = g.node.value;
      for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (lower == "all-linear") {
        t.kind = TargetModules::Kind::kAllLinear;
      } else {
        // PEFT: any other string is a regular expression a module path must match whole.
        auto re = Regex::Compile(g.node.value, kName);
        if (!re.ok()) {
          errors.Add(g.where, kName,
                     fmt::format("'{}' is not a valid regular expression: {}", g.node.value,
                                 re.status().message()));
          return;
        }
        t.kind = TargetModules::Kind::kRegex;
        t.pattern = g.node.value;
      }
    } else {
      errors.Add(g.where, kName,
                 fmt::format("expected all-linear, a list of module names or a regular "
                             "expression, got {}",
                             Describe(g.node)));
      return;
    }
    c.lora.targets = std::move(t);
  };
}

// lora_modules_to_save: a list of module names (one name alone is accepted as a list of one).
Setter ModulesToSaveField() {
  return [](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    const char* kName = "lora_modules_to_save";
    std::vector<std::string> names;
    if (IsText(g.node) && !Trim(g.node.value).empty()) {
      names.push_back(g.node.value);
    } else if (g.node.IsSequence()) {
      for (const YamlNode& item : g.node.items) {
        if (!IsText(item) || Trim(item.value).empty()) {
          errors.Add(g.where, kName,
                     fmt::format("expected module names such as lm_head, got {} in the list",
                                 Describe(item)));
          return;
        }
        names.push_back(item.value);
      }
    } else if (!g.node.IsNull()) {
      errors.Add(g.where, kName,
                 fmt::format("expected a list of module names, got {}", Describe(g.node)));
      return;
    }
    c.lora.modules_to_save = std::move(names);
  };
}

Setter TaskTypeField() {
  return [](const GivenValue& g, TrainConfig&, ErrorList& errors) {
    if (!IsText(g.node) || g.node.value != "CAUSAL_LM") {
      errors.Add(g.where, "lora_task_type",
                 fmt::format("{} is not supported; air trains causal language models: CAUSAL_LM",
                             Describe(g.node)));
    }
  };
}

// lora_target_parameters: PEFT's target_parameters, a list of parameter names (LoRA on
// parameters: GPT-OSS's expert weights mlp.experts.gate_up_proj / mlp.experts.down_proj, through
// PEFT's ParamWrapper); which parameters they match is decided against the model
// (lora::PlanLora), as is PEFT's refusal of lora_dropout != 0 with them.
Setter TargetParametersField() {
  return [](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    const char* kName = "lora_target_parameters";
    std::vector<std::string> names;
    if (g.node.IsSequence()) {
      for (const YamlNode& item : g.node.items) {
        if (!IsText(item) || Trim(item.value).empty()) {
          errors.Add(g.where, kName,
                     fmt::format("expected parameter names such as mlp.experts.gate_up_proj, got "
                                 "{} in the list",
                                 Describe(item)));
          return;
        }
        names.push_back(item.value);
      }
    } else if (!g.node.IsNull()) {
      errors.Add(g.where, kName,
                 fmt::format("expected a list of parameter names such as "
                             "[mlp.experts.gate_up_proj, mlp.experts.down_proj], got {}",
                             Describe(g.node)));
      return;
    }
    c.lora.target_parameters = std::move(names);
  };
}

}  // namespace

std::vector<FieldSpec> LoraFieldSpecs() {
  std::vector<FieldSpec> s;
  auto lora = [](auto member) {
    return [member](TrainConfig & c) -> auto& { return c.lora.*member; };
  };
  s.push_back({"use_peft", "", false, BoolField("use_peft", lora(&lora::LoraConfig::enabled))});
  s.push_back({"lora_r", "", false,
               IntField("lora_r", lora(&lora::LoraConfig::r),
                        {1, 1 << 20, true, true, "the rank must be >= 1"})});
  s.push_back(
      {"lora_alpha", "", false,
       FloatField("lora_alpha", lora(&lora::LoraConfig::alpha),
                  {0, std::numeric_limits<double>::infinity(), false, true, "must be > 0"})});
  s.push_back({"lora_dropout", "", false,
               FloatField("lora_dropout", lora(&lora::LoraConfig::dropout),
                          {0, 1, true, false, "must be in [0, 1)"})});
  s.push_back({"lora_target_modules", "", false, TargetModulesField()});
  s.push_back(
      {"use_rslora", "", false, BoolField("use_rslora", lora(&lora::LoraConfig::use_rslora))});
  s.push_back({"lora_target_parameters", "", false, TargetParametersField()});
  s.push_back({"lora_modules_to_save", "", false, ModulesToSaveField()});
  s.push_back({"lora_task_type", "", false, TaskTypeField()});
  s.push_back({"lora_adapter_path", "", false,
               StringField("lora_adapter_path", lora(&lora::LoraConfig::adapter_path))});
  return s;
}

void CheckLoraFields(const std::map<std::string, GivenValue>& given, TrainConfig& config,
                     ErrorList& errors) {
  if (config.lora.enabled) return;
  // A LoRA key without use_peft would silently train the whole model: refuse it (TRL ignores
  // them; air says so).
  for (const FieldSpec& spec : LoraFieldSpecs()) {
    if (spec.name == "use_peft") continue;
    auto it = given.find(spec.name);
    if (it == given.end()) continue;
    errors.Add(it->second.where, spec.name,
               "takes effect only with use_peft: true (without it the whole model is trained); "
               "add use_peft: true, or remove it");
  }
}

}  // namespace air::engine::train::fields
