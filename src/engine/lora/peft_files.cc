// PEFT's adapter files (see peft_files.h).
#include "engine/lora/peft_files.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/strings.h"
#include "engine/io/state_dict_adapter.h"

namespace air::engine::lora {
namespace {

using nlohmann::json;

std::string ShapeText(const Shape& s) {
  std::vector<std::string> dims;
  for (int64_t d : s) dims.push_back(std::to_string(d));
  return "[" + Join(dims, ", ") + "]";
}

// A number PEFT would write as an int when it is one (lora_alpha: 16, not 16.0).
json Number(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return static_cast<int64_t>(v);
  return v;
}

}  // namespace

std::string PeftKey(const CausalLm& model, const std::string& name) {
  return kPeftPrefix + StateDictAdapterFor(model.config())->ToHf(name);
}

Result<PeftAdapterConfig> ReadPeftAdapterConfig(const std::string& dir) {
  const std::string path = dir + "/" + kAdapterConfigName;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFound(fmt::format("{}: no such file; a PEFT adapter directory holds {} and {}", path,
                                kAdapterConfigName, kAdapterWeightsName));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("{}: cannot open", path));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument(fmt::format("{}: not a JSON object", path));
  }
  auto bad = [&](const std::string& field, const std::string& what) {
    return InvalidArgument(fmt::format("{}: {}: {}", path, field, what));
  };
  PeftAdapterConfig out;
  LoraConfig& c = out.lora;
  c.enabled = true;
  const std::string type = j.value("peft_type", "");
  if (type != "LORA") {
    return bad("peft_type", fmt::format("'{}' is not LORA; air trains LoRA adapters only", type));
  }
  if (!j.contains("r") || !j["r"].is_number_integer()) return bad("r", "missing or not an integer");
  c.r = j["r"].get<int>();
  if (c.r < 1) return bad("r", fmt::format("{} is out of range: the rank must be >= 1", c.r));
  if (j.contains("lora_alpha")) {
    if (!j["lora_alpha"].is_number()) return bad("lora_alpha", "not a number");
    c.alpha = j["lora_alpha"].get<double>();
  } else {
    c.alpha = 8;  // PEFT's default
  }
  c.dropout = j.contains("lora_dropout") && j["lora_dropout"].is_number()
                  ? j["lora_dropout"].get<double>()
                  : 0.0;
  if (c.dropout < 0 || c.dropout >= 1) return bad("lora_dropout", "must be in [0, 1)");
  c.use_rslora = j.value("use_rslora", false);
  const json& targets = j.contains("target_modules") ? j["target_modules"] : json();
  if (targets.is_string()) {
    const std::string t = targets.get<std::string>();
    std::string lower = t;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    c.targets.kind =
        lower == "all-linear" ? TargetModules::Kind::kAllLinear : TargetModules::Kind::kRegex;
    c.targets.pattern = t;
  } else if (targets.is_array()) {
    c.targets.kind = TargetModules::Kind::kNames;
    for (const json& t : targets) {
      if (!t.is_string()) return bad("target_modules", "a list of module names expected");
      c.targets.names.push_back(t.get<std::string>());
    }
  } else if (!targets.is_null()) {
    return bad("target_modules", "expected a list of module names or a string");
  }
  if (j.contains("modules_to_save") && j["modules_to_save"].is_array()) {
    for (const json& m : j["modules_to_save"]) {
      if (m.is_string()) c.modules_to_save.push_back(m.get<std::string>());
    }
  }
  // What air cannot train the same way is refused by name.
  if (j.value("bias", std::string("none")) != "none") {
    return bad("bias", "only \"none\" is supported (no trained biases)");
  }
  if (j.value("use_dora", false)) return bad("use_dora", "DoRA is not supported");
  if (j.value("fan_in_fan_out", false)) return bad("fan_in_fan_out", "not supported (Conv1D)");
  if (j.value("lora_bias", false)) return bad("lora_bias", "not supported");
  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    if (j.contains(key) && j[key].is_object() && !j[key].empty()) {
      return bad(key, "per-module ranks or alphas are not supported");
    }
  }
  if (j.contains("target_parameters") && !j["target_parameters"].is_null()) {
    if (!j["target_parameters"].is_array()) {
      return bad("target_parameters", "expected a list of parameter names");
    }
    for (const json& t : j["target_parameters"]) {
      if (!t.is_string()) return bad("target_parameters", "a list of parameter names expected");
      c.target_parameters.push_back(t.get<std::string>());
    }
  }
  if (j.contains("layers_to_transform") && !j["layers_to_transform"].is_null()) {
    return bad("layers_to_transform", "not supported; list the modules in target_modules");
  }
  if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string()) {
    out.base_model_name_or_path = j["base_model_name_or_path"].get<std::string>();
  }
  return out;
}

Status SavePeftAdapter(const std::string& dir, const CausalLm& model, const Lora& lora,
                       const std::vector<Tensor>& values,
                       const std::string& base_model_name_or_path, Env* env) {
  const std::vector<Parameter>& params = model.parameters();
  if (values.size() != params.size()) {
    return Internal(
        fmt::format("SavePeftAdapter: {} tensors for {} parameters", values.size(), params.size()));
  }
  std::vector<std::string> keys;
  std::vector<Tensor> file_values;  // in PEFT's layout (lora_model.h)
  for (size_t i = 0; i < params.size(); ++i) {
    if (!lora.InAdapter(params[i].name)) continue;
    keys.push_back(PeftKey(model, params[i].name));
    file_values.push_back(lora.ToFile(params[i], values[i]));
  }
  std::vector<NamedTensorRef> refs;
  for (size_t k = 0; k < keys.size(); ++k) refs.push_back({keys[k], &file_values[k]});
  AIR_RETURN_IF_ERROR(env->CreateDirs(dir));
  AIR_RETURN_IF_ERROR(WriteSafetensors(dir + "/" + kAdapterWeightsName, refs, DType::kF32,
                                       {{"format", "pt"}}, env));
  const LoraConfig& c = lora.config();
  json config = json::object();
  config["alpha_pattern"] = json::object();
  config["auto_mapping"] = nullptr;
  config["base_model_name_or_path"] = base_model_name_or_path;
  config["bias"] = "none";
  config["fan_in_fan_out"] = false;
  config["inference_mode"] = true;
  config["init_lora_weights"] = true;
  config["layers_pattern"] = nullptr;
  config["layers_to_transform"] = nullptr;
  config["lora_alpha"] = Number(c.alpha);
  config["lora_bias"] = false;
  config["lora_dropout"] = c.dropout;
  config["modules_to_save"] = c.modules_to_save.empty() ? json() : json(c.modules_to_save);
  config["peft_type"] = "LORA";
  config["r"] = c.r;
  config["rank_pattern"] = json::object();
  config["revision"] = nullptr;
  if (c.targets.kind == TargetModules::Kind::kRegex) {
    config["target_modules"] = c.targets.pattern;
  } else if (c.targets.kind == TargetModules::Kind::kDefault && lora.plan().target_names.empty()) {
    config["target_modules"] = nullptr;  // target_parameters alone
  } else {
    config["target_modules"] = lora.plan().target_names;
  }
  config["target_parameters"] = c.target_parameters.empty() ? json() : json(c.target_parameters);
  config["task_type"] = "CAUSAL_LM";
  config["use_dora"] = false;
  config["use_rslora"] = c.use_rslora;
  return env->WriteFileAtomic(dir + "/" + kAdapterConfigName, config.dump(2) + "\n");
}

Result<std::unique_ptr<PeftAdapterReader>> PeftAdapterReader::Open(const std::string& dir,
                                                                   const CausalLm& model,
                                                                   const Lora& lora) {
  const std::string path = dir + "/" + kAdapterWeightsName;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    const bool bin = std::filesystem::exists(dir + "/adapter_model.bin", ec);
    return NotFound(fmt::format("{}: no such file{}", path,
                                bin ? " (adapter_model.bin is a pickle, which air does not read: "
                                      "save the adapter with safe_serialization=True)"
                                    : ""));
  }
  std::unique_ptr<PeftAdapterReader> reader(new PeftAdapterReader());
  AIR_ASSIGN_OR_RETURN(reader->file_, SafetensorsFile::Open(path));
  const auto adapter = StateDictAdapterFor(model.config());
  // Every tensor of the file must be one of the model's adapter parameters, with its shape.
  for (const SafetensorsEntry& e : reader->file_->entries()) {
    const std::string hf =
        e.name.rfind(kPeftPrefix, 0) == 0 ? e.name.substr(std::string(kPeftPrefix).size()) : e.name;
    std::optional<std::string> name = adapter->FromHf(hf);
    const Parameter* p = name ? model.FindParameter(*name) : nullptr;
    if (p == nullptr || !lora.InAdapter(p->name)) {
      return InvalidArgument(fmt::format(
          "{}: {} is not a parameter of this model's adapter (the adapter was trained on another "
          "base model, or with other target_modules / modules_to_save)",
          path, e.name));
    }
    if (e.shape != lora.FileShape(*p)) {
      return InvalidArgument(fmt::format(
          "{}: {} has shape {} but the model's is {} (another base model, or another rank r)", path,
          e.name, ShapeText(e.shape), ShapeText(lora.FileShape(*p))));
    }
  }
  for (const Parameter& p : model.parameters()) {
    if (!lora.InAdapter(p.name)) continue;
    if (reader->file_->Find(PeftKey(model, p.name)) == nullptr) {
      return InvalidArgument(fmt::format("{}: {} is missing (shape {})", path,
                                         PeftKey(model, p.name), ShapeText(lora.FileShape(p))));
    }
  }
  return reader;
}

Status PeftAdapterReader::LoadUnit(CausalLm& model, const Lora& lora, int unit) const {
  Tensor host;
  for (Parameter& p : model.parameters()) {
    if ((unit >= 0 && p.unit != unit) || !lora.InAdapter(p.name)) continue;
    host.ResizeZeroed(lora.FileShape(p));
    AIR_RETURN_IF_ERROR(file_->ReadInto(PeftKey(model, p.name), host));
    model.backend().FromHostTensor(p.value, lora.FromFile(p, host).data());
  }
  return Status::Ok();
}

}  // namespace air::engine::lora
