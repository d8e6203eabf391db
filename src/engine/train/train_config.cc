// Parsing and validation of `air train`'s YAML parameters (see train_config.h). One table lists
// every key with its type and range; a single pass over the file (then the --set overrides)
// collects every error before anything is returned. YAML is read by spec::LoadYaml, the one loader
// (its alias, size and depth limits).
#include "engine/train/train_config.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include "base/strings.h"
#include "engine/train/train_config_fields.h"
#include "engine/train/train_device.h"
#include "spec/yaml_tree.h"

namespace air::engine::train {
namespace {

using namespace fields;  // NOLINT: this file is the fields' main user
using spec::YamlNode;

Setter SchedulerField() {
  return [](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    static const std::vector<std::pair<std::string, LrSchedulerType>> kTypes = {
        {"constant", LrSchedulerType::kConstant},
        {"constant_with_warmup", LrSchedulerType::kConstantWithWarmup},
        {"linear", LrSchedulerType::kLinear},
        {"cosine", LrSchedulerType::kCosine}};
    std::vector<std::string> names;
    for (const auto& [n, t] : kTypes) {
      names.push_back(n);
      if (g.node.IsScalar() && g.node.value == n) {
        c.lr_scheduler_type = t;
        return;
      }
    }
    std::string got = g.node.IsScalar() ? g.node.value : "";
    errors.Add(g.where, "lr_scheduler_type",
               fmt::format("unknown scheduler {}{}; valid: {}", Describe(g.node),
                           DidYouMeanSuffix(got, names), Join(names, ", ")));
  };
}

Setter ResumeField() {
  return [](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    if (std::optional<bool> b = ReadBool(g.node)) {
      c.resume_from_checkpoint = *b ? "latest" : "";
      return;
    }
    if (!IsText(g.node) || Trim(g.node.value).empty()) {
      errors.Add(g.where, "resume_from_checkpoint",
                 fmt::format("expected latest, true, false or a checkpoint directory, got {}",
                             Describe(g.node)));
      return;
    }
    c.resume_from_checkpoint = g.node.value;
  };
}

Setter ShardingStrategyField() {
  return [](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    std::optional<fsdp::ShardingStrategy> s;
    if (g.node.IsScalar()) s = fsdp::ParseShardingStrategy(g.node.value);
    if (!s) {
      std::string got = g.node.IsScalar() ? g.node.value : "";
      errors.Add(g.where, "fsdp_sharding_strategy",
                 fmt::format("unknown strategy {}{}; valid: {}", Describe(g.node),
                             DidYouMeanSuffix(got, fsdp::ShardingStrategyNames()),
                             Join(fsdp::ShardingStrategyNames(), ", ")));
      return;
    }
    c.sharding_strategy = *s;
  };
}

// HF TrainingArguments' `fsdp` string; checked against fsdp_sharding_strategy in Validate.
Setter HfFsdpField() {
  return [](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    if (!g.node.IsScalar() && !g.node.IsNull()) {
      errors.Add(g.where, "fsdp",
                 fmt::format("expected a string such as \"full_shard auto_wrap\", got {}",
                             Describe(g.node)));
      return;
    }
    fsdp::HfFsdpOption o = fsdp::ParseHfFsdpOption(g.node.IsNull() ? "" : g.node.value);
    if (!o.error.empty()) {
      errors.Add(g.where, "fsdp", o.error);
      return;
    }
    c.sharding_strategy = *o.strategy;
  };
}

// One dtype of the mixed_precision map: float32 or bfloat16 (float16 is recognized, and refused:
// the engine has no fp16 compute path).
std::optional<DType> ReadPrecisionDType(const YamlNode& node, const std::string& where,
                                        const std::string& key, ErrorList& errors) {
  std::optional<DType> d = IsText(node) ? fsdp::ParseTorchDType(node.value) : std::nullopt;
  if (!d) {
    errors.Add(where, "mixed_precision." + key,
               fmt::format("unknown dtype {}; valid: {}", Describe(node), fsdp::TorchDTypeNames()));
    return std::nullopt;
  }
  if (*d == DType::kF16) {
    errors.Add(where, "mixed_precision." + key,
               fmt::format("float16 has no compute path in air's engine (no fp16 kernels, no loss "
                           "scaling); valid: {}",
                           fsdp::TorchDTypeNames()));
    return std::nullopt;
  }
  return d;
}

Setter MixedPrecisionField() {
  return [](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    if (IsText(g.node)) {  // Accelerate's mixed_precision: "bf16" | "no" | "fp32"
      const std::string v = g.node.value;
      if (v == "bf16" || v == "bfloat16") {
        c.precision = fsdp::Bf16Policy();
      } else if (v == "no" || v == "fp32" || v == "float32") {
        c.precision = fsdp::MixedPrecision{};
      } else {
        errors.Add(g.where, "mixed_precision",
                   fmt::format("expected bf16, no, or a map {{param_dtype, reduce_dtype, "
                               "buffer_dtype}}, got {}{}",
                               Describe(g.node),
                               v == "fp16" || v == "float16"
                                   ? " (fp16 has no compute path in air's engine)"
                                   : ""));
      }
      return;
    }
    if (!g.node.IsMapping()) {
      errors.Add(g.where, "mixed_precision",
                 fmt::format("expected a map {{param_dtype, reduce_dtype, buffer_dtype}} or bf16, "
                             "got {}",
                             Describe(g.node)));
      return;
    }
    static const std::vector<std::string> kKeys = {"param_dtype", "reduce_dtype", "buffer_dtype"};
    fsdp::MixedPrecision mp;
    bool reduce_given = false;
    for (const auto& [key, value] : g.node.entries) {
      const std::string name = key.IsScalar() ? key.value : "";
      const std::string where =
          key.location.line > 0
              ? fmt::format("{}:{}:{}", SourceOf(g.where), key.location.line, key.location.column)
              : g.where;
      std::optional<DType> d;
      if (name == "param_dtype" || name == "reduce_dtype" || name == "buffer_dtype") {
        d = ReadPrecisionDType(value, where, name, errors);
      } else {
        errors.Add(where, "mixed_precision",
                   fmt::format("unknown key '{}'{}; valid: {}", name, DidYouMeanSuffix(name, kKeys),
                               Join(kKeys, ", ")));
        continue;
      }
      if (!d) continue;
      if (name == "param_dtype") mp.param_dtype = *d;
      if (name == "reduce_dtype") {
        mp.reduce_dtype = *d;
        reduce_given = true;
      }
      if (name == "buffer_dtype") mp.buffer_dtype = *d;
    }
    if (!reduce_given) mp.reduce_dtype = mp.param_dtype;  // FSDP1: None takes param_dtype
    c.precision = mp;
  };
}

// ddp_backend: nccl or gloo (HF's other values name hardware air does not drive).
Setter DdpBackendField() {
  return [](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    if (!IsText(g.node) || (g.node.value != "nccl" && g.node.value != "gloo")) {
      errors.Add(g.where, "ddp_backend",
                 fmt::format("{} is not a backend air runs; valid: nccl (GPUs), gloo (the CPU, or "
                             "GPUs staged through the host)",
                             Describe(g.node)));
      return;
    }
    c.ddp_backend = g.node.value;
  };
}

// torch_dtype: float32 or bfloat16 (the dtype the parameters and their state are kept in).
Setter TorchDTypeField() {
  return [](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    const std::optional<DType> d =
        IsText(g.node) ? fsdp::ParseTorchDType(g.node.value) : std::nullopt;
    if (!d || *d == DType::kF16) {
      errors.Add(g.where, "torch_dtype",
                 fmt::format("{} is not a dtype air keeps parameters in; valid: float32, "
                             "bfloat16",
                             Describe(g.node)));
      return;
    }
    c.torch_dtype = *d;
  };
}

// device: cpu, cuda, cuda:N or auto (train_device.h); whether this machine has the GPU is
// checked when training is prepared, not here (a config is valid anywhere).
Setter DeviceField() {
  return [](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    if (!IsText(g.node) || !IsTrainingDevice(g.node.value)) {
      errors.Add(
          g.where, "device",
          fmt::format("{} is not a device; valid: {}", Describe(g.node), TrainingDeviceChoices()));
      return;
    }
    c.device = g.node.value;
  };
}

const std::vector<FieldSpec>& FieldSpecs() {
  static const std::vector<FieldSpec> kSpecs = [] {
    const Range positive{0, std::numeric_limits<double>::infinity(), false, true, "must be > 0"};
    const Range at_least_one{1, std::numeric_limits<double>::infinity(), true, true,
                             "must be >= 1"};
    const Range non_negative{0, std::numeric_limits<double>::infinity(), true, true,
                             "must be >= 0"};
    const Range beta{0, 1, true, false, "must be in [0, 1)"};
    const Range unit{0, 1, true, true, "must be in [0, 1]"};
    std::vector<FieldSpec> s;
    s.push_back(
        {"model_name", "", true, StringField("model_name", Member(&TrainConfig::model_name))});
    s.push_back({"dataset_name", "", true,
                 StringField("dataset_name", Member(&TrainConfig::dataset_name))});
    s.push_back(
        {"output_dir", "", true, StringField("output_dir", Member(&TrainConfig::output_dir))});
    s.push_back({"max_seq_len", "max_length", false,
                 IntField("max_seq_len", Member(&TrainConfig::max_seq_len),
                          {2, 1 << 20, true, true, "must be between 2 and 1048576"})});
    s.push_back({"per_device_batch_size", "", false,
                 IntField("per_device_batch_size", Member(&TrainConfig::per_device_batch_size),
                          at_least_one)});
    s.push_back({"packing", "", false, BoolField("packing", Member(&TrainConfig::packing))});
    s.push_back({"train_on_prompt", "", false,
                 BoolField("train_on_prompt", Member(&TrainConfig::train_on_prompt))});
    s.push_back({"gradient_accumulation_steps", "", false,
                 IntField("gradient_accumulation_steps",
                          Member(&TrainConfig::gradient_accumulation_steps), at_least_one)});
    s.push_back(
        {"global_batch_size", "", false,
         IntField("global_batch_size", Member(&TrainConfig::global_batch_size), at_least_one)});
    s.push_back({"learning_rate", "", false,
                 FloatField("learning_rate", Member(&TrainConfig::learning_rate), non_negative)});
    s.push_back(
        {"max_steps", "", false,
         IntField("max_steps", Member(&TrainConfig::max_steps),
                  {1, 1e12, true, true, "must be >= 1, or -1 to let num_train_epochs decide"},
                  [](int64_t v) { return v == -1; })});
    s.push_back({"num_train_epochs", "", false,
                 FloatField("num_train_epochs", Member(&TrainConfig::num_train_epochs), positive)});
    s.push_back({"warmup_ratio", "", false,
                 FloatField("warmup_ratio", Member(&TrainConfig::warmup_ratio), unit)});
    s.push_back({"warmup_steps", "", false,
                 IntField("warmup_steps", Member(&TrainConfig::warmup_steps), non_negative)});
    s.push_back({"lr_scheduler_type", "", false, SchedulerField()});
    s.push_back({"weight_decay", "", false,
                 FloatField("weight_decay", Member(&TrainConfig::weight_decay), non_negative)});
    s.push_back({"max_grad_norm", "", false,
                 FloatField("max_grad_norm", Member(&TrainConfig::max_grad_norm),
                            {0, std::numeric_limits<double>::infinity(), true, true,
                             "must be >= 0 (0 disables clipping)"})});
    s.push_back({"adam_beta1", "", false,
                 FloatField("adam_beta1", Member(&TrainConfig::adam_beta1), beta)});
    s.push_back({"adam_beta2", "", false,
                 FloatField("adam_beta2", Member(&TrainConfig::adam_beta2), beta)});
    s.push_back({"adam_epsilon", "", false,
                 FloatField("adam_epsilon", Member(&TrainConfig::adam_epsilon), positive)});
    s.push_back({"seed", "", false, Int64Field("seed", Member(&TrainConfig::seed))});
    s.push_back({"logging_steps", "", false,
                 IntField("logging_steps", Member(&TrainConfig::logging_steps), at_least_one)});
    s.push_back({"save_steps", "", false,
                 IntField("save_steps", Member(&TrainConfig::save_steps),
                          {0, 1e12, true, true, "must be >= 0 (0: save only at the end)"})});
    s.push_back({"resume_from_checkpoint", "", false, ResumeField()});
    s.push_back({"device", "", false, DeviceField()});
    s.push_back({"torch_dtype", "dtype", false, TorchDTypeField()});
    s.push_back({"bf16", "", false, BoolField("bf16", Member(&TrainConfig::bf16))});
    s.push_back({"mixed_precision", "", false, MixedPrecisionField()});
    s.push_back(
        {"activation_checkpointing", "", false,
         BoolField("activation_checkpointing", Member(&TrainConfig::activation_checkpointing))});
    s.push_back({"fused_linear_cross_entropy", "", false,
                 BoolField("fused_linear_cross_entropy",
                           Member(&TrainConfig::fused_linear_cross_entropy))});
    s.push_back({"fsdp_sharding_strategy", "", false, ShardingStrategyField()});
    s.push_back({"fsdp", "", false, HfFsdpField()});
    for (FieldSpec& spec : LoraFieldSpecs()) s.push_back(std::move(spec));
    s.push_back({"ddp_backend", "", false, DdpBackendField()});
    s.push_back({"ddp_timeout", "", false,
                 IntField("ddp_timeout", Member(&TrainConfig::ddp_timeout),
                          {1, 86400, true, true, "must be between 1 and 86400 seconds"})});
    return s;
  }();
  return kSpecs;
}

const FieldSpec* FindSpec(const std::string& key) {
  for (const auto& spec : FieldSpecs()) {
    if (spec.name == key || (!spec.alias.empty() && spec.alias == key)) return &spec;
  }
  return nullptr;
}

std::string MarkText(const std::string& source, const spec::SourceLocation& at) {
  if (at.line <= 0) return source;
  return fmt::format("{}:{}:{}", source, at.line, at.column);
}

// Records `key: value` from the file or an override into `given` (by canonical name), reporting
// unknown keys and two spellings of one key given in the same source.
void Collect(const std::string& key, const GivenValue& value, bool is_override,
             std::map<std::string, GivenValue>& given, std::map<std::string, std::string>& spelled,
             ErrorList& errors) {
  const FieldSpec* spec = FindSpec(key);
  if (spec == nullptr) {
    // A likely typo gets a suggestion; anything else gets the whole list.
    std::string suggestion = DidYouMeanSuffix(key, TrainConfigKeys());
    errors.Add(value.where, key,
               suggestion.empty() ? fmt::format("unknown parameter; valid parameters: {}",
                                                Join(TrainConfigKeys(), ", "))
                                  : "unknown parameter" + suggestion);
    return;
  }
  auto it = given.find(spec->name);
  if (it != given.end() && !is_override) {
    std::string first = spelled[spec->name];
    errors.Add(value.where, key,
               first == key
                   ? fmt::format("duplicate key (first given at {})", it->second.where)
                   : fmt::format("'{}' and '{}' are the same parameter (first given at {}); "
                                 "keep one",
                                 first, key, it->second.where));
    return;
  }
  given[spec->name] = value;
  spelled[spec->name] = key;
}

}  // namespace

const char* LrSchedulerTypeName(LrSchedulerType type) {
  switch (type) {
    case LrSchedulerType::kConstant:
      return "constant";
    case LrSchedulerType::kConstantWithWarmup:
      return "constant_with_warmup";
    case LrSchedulerType::kLinear:
      return "linear";
    case LrSchedulerType::kCosine:
      return "cosine";
  }
  return "?";
}

int TrainConfig::WarmupStepsFor(int total_steps) const {
  if (warmup_steps > 0) return warmup_steps;
  return static_cast<int>(std::ceil(static_cast<double>(total_steps) * warmup_ratio));
}

std::string TrainConfig::Where(const std::string& field) const {
  auto it = sources.find(field);
  return it == sources.end() ? field : it->second + ": " + field;
}

const std::vector<std::string>& TrainConfigKeys() {
  static const std::vector<std::string> kKeys = [] {
    std::vector<std::string> keys;
    for (const auto& spec : FieldSpecs()) {
      keys.push_back(spec.name);
      if (!spec.alias.empty()) keys.push_back(spec.alias);
    }
    return keys;
  }();
  return kKeys;
}

Result<TrainConfig> ParseTrainConfig(const std::string& yaml_text, const std::string& source_name,
                                     const std::vector<std::string>& overrides) {
  ErrorList errors;
  std::map<std::string, GivenValue> given;
  std::map<std::string, std::string> spelled;

  AIR_ASSIGN_OR_RETURN(YamlNode root, spec::LoadYaml(yaml_text, source_name));
  if (!(root.IsScalar() && root.IsNull())) {
    if (!root.IsMapping()) {
      errors.Add(MarkText(source_name, root.location), "",
                 fmt::format("expected a map of parameters (key: value), got {}", Describe(root)));
      return errors.ToStatus();
    }
    for (const auto& [key, value] : root.entries) {
      if (!key.IsScalar()) {
        errors.Add(MarkText(source_name, key.location), "",
                   fmt::format("a parameter name must be a string, got {}", Describe(key)));
        continue;
      }
      Collect(key.value, {value, MarkText(source_name, key.location)}, false, given, spelled,
              errors);
    }
  }

  for (const std::string& item : overrides) {
    size_t eq = item.find('=');
    std::string where = fmt::format("--set {}", item);
    if (eq == std::string::npos || eq == 0) {
      errors.Add(where, "", "expected key=value (for example --set learning_rate=1e-4)");
      continue;
    }
    std::string key(Trim(item.substr(0, eq)));
    YamlNode value;
    std::string yaml_error;
    if (!spec::ParseYamlValue(item.substr(eq + 1), &value, &yaml_error)) {
      errors.Add(where, key, fmt::format("the value is not valid YAML: {}", yaml_error));
      continue;
    }
    Collect(key, {value, where}, true, given, spelled, errors);
  }

  TrainConfig config;
  std::set<std::string> failed;  // fields whose value was reported as an error
  for (const auto& spec : FieldSpecs()) {
    auto it = given.find(spec.name);
    if (it == given.end()) {
      if (spec.required) {
        errors.Add(source_name, spec.name, "required parameter is missing");
      }
      continue;
    }
    const size_t before = errors.size();
    spec.set(it->second, config, errors);
    if (errors.size() > before) failed.insert(spec.name);
    config.sources[spec.name] = it->second.where;
  }

  // Pairs that conflict.
  if (given.count("warmup_ratio") && given.count("warmup_steps") && config.warmup_ratio > 0 &&
      config.warmup_steps > 0) {
    errors.Add(given["warmup_steps"].where, "warmup_steps",
               fmt::format("give warmup_steps or warmup_ratio, not both (warmup_ratio at {})",
                           given["warmup_ratio"].where));
  }
  if (given.count("global_batch_size") && given.count("gradient_accumulation_steps")) {
    errors.Add(given["global_batch_size"].where, "global_batch_size",
               fmt::format("give global_batch_size or gradient_accumulation_steps ({}), not "
                           "both: with global_batch_size the accumulation is derived from the "
                           "number of ranks",
                           given["gradient_accumulation_steps"].where));
  }
  if (config.lr_scheduler_type == LrSchedulerType::kConstant &&
      (config.warmup_steps > 0 || config.warmup_ratio > 0)) {
    auto it = given.find("lr_scheduler_type");
    errors.Add(it == given.end() ? source_name : it->second.where, "lr_scheduler_type",
               "'constant' has no warmup but a warmup was given; use constant_with_warmup");
  }
  if (given.count("fsdp") && given.count("fsdp_sharding_strategy")) {
    const GivenValue& hf = given["fsdp"];
    const GivenValue& named = given["fsdp_sharding_strategy"];
    fsdp::HfFsdpOption o = fsdp::ParseHfFsdpOption(hf.node.IsScalar() ? hf.node.value : "");
    std::optional<fsdp::ShardingStrategy> n =
        named.node.IsScalar() ? fsdp::ParseShardingStrategy(named.node.value) : std::nullopt;
    if (o.strategy && n && *o.strategy != *n) {
      errors.Add(hf.where, "fsdp",
                 fmt::format("means {} but fsdp_sharding_strategy ({}) says {}; give one",
                             fsdp::ShardingStrategyName(*o.strategy), named.where,
                             fsdp::ShardingStrategyName(*n)));
    }
  }
  // bf16 (HF) and mixed_precision (FSDP) say the same thing or only one is given.
  if (given.count("bf16") && given.count("mixed_precision") && !failed.count("bf16") &&
      !failed.count("mixed_precision")) {
    const bool low = config.precision.param_dtype == DType::kBF16;
    if (config.bf16 != low || (config.bf16 && config.precision.reduce_dtype != DType::kBF16)) {
      errors.Add(given["mixed_precision"].where, "mixed_precision",
                 fmt::format("says param_dtype {}, reduce_dtype {} but bf16 ({}) is {}; give one "
                             "of them (bf16: true means bfloat16 parameters and reductions)",
                             fsdp::TorchDTypeName(config.precision.param_dtype),
                             fsdp::TorchDTypeName(config.precision.reduce_dtype),
                             given["bf16"].where, config.bf16 ? "true" : "false"));
    }
  } else if (config.bf16) {
    config.precision = fsdp::Bf16Policy();
  }
  // bf16 parameters compute in bf16: torch_dtype bfloat16 implies bf16, and refuses fp32 compute.
  if (config.torch_dtype == DType::kBF16 && !failed.count("torch_dtype")) {
    const bool fp32_compute = config.precision.param_dtype == DType::kF32;
    const bool asked_fp32 = (given.count("bf16") && !config.bf16) || given.count("mixed_precision");
    if (fp32_compute && asked_fp32) {
      const std::string& at =
          given.count("mixed_precision") ? given["mixed_precision"].where : given["bf16"].where;
      errors.Add(given["torch_dtype"].where, "torch_dtype",
                 fmt::format("bfloat16 keeps the parameters in bf16, which compute in bf16, but "
                             "{} asks for float32 compute; give bf16: true (or leave it out)",
                             at));
    } else if (fp32_compute) {
      config.precision = fsdp::Bf16Policy();
      config.bf16 = true;
    }
  }
  CheckLoraFields(given, config, errors);
  if (!errors.empty()) return errors.ToStatus();
  return config;
}

}  // namespace air::engine::train
