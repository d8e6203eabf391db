// The state-dict adapters' shared parts: the default load and check, the table renaming, and
// the choice by architecture (see state_dict_adapter.h).
#include "engine/io/state_dict_adapter.h"

namespace air::engine {

namespace {

// "layers.12.rest" -> ("12", "rest") after stripping `prefix`; nullopt when it is not one.
std::optional<std::pair<std::string, std::string>> SplitLayer(const std::string& name,
                                                              const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return std::nullopt;
  const std::string index = name.substr(prefix.size(), dot - prefix.size());
  if (index.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::make_pair(index, name.substr(dot + 1));
}

}  // namespace

Status StateDictAdapter::LoadInto(const WeightReader& reader, const std::string& name,
                                  const Shape& shape, const Backend& backend, const View& value,
                                  Tensor& scratch) const {
  scratch.ResizeZeroed(shape);
  AIR_RETURN_IF_ERROR(reader.ReadInto(ToHf(name), scratch));
  backend.FromHostTensor(value, scratch.data());
  return Status::Ok();
}

Status StateDictAdapter::Check(const WeightReader&) const { return Status::Ok(); }

std::optional<std::string> TableStateDictAdapter::Translate(const std::string& rest,
                                                            bool to_hf) const {
  for (const auto& [mine, hf] : layer_) {
    const std::string& from = to_hf ? mine : hf;
    const std::string& to = to_hf ? hf : mine;
    if (rest == from) return to;
    if (rest.rfind(from + ".", 0) == 0) return to + rest.substr(from.size());
  }
  return std::nullopt;
}

std::string TableStateDictAdapter::ToHf(const std::string& name) const {
  for (const auto& [mine, hf] : root_) {
    if (name == mine) return hf;
  }
  if (auto layer = SplitLayer(name, "layers.")) {
    if (auto rest = Translate(layer->second, true)) {
      return "model.layers." + layer->first + "." + *rest;
    }
  }
  return name;  // not a parameter of this architecture: kept as is (loading names it missing)
}

std::optional<std::string> TableStateDictAdapter::FromHf(const std::string& hf_name) const {
  for (const auto& [mine, hf] : root_) {
    if (hf_name == hf) return mine;
  }
  if (auto layer = SplitLayer(hf_name, "model.layers.")) {
    if (auto rest = Translate(layer->second, false)) {
      return "layers." + layer->first + "." + *rest;
    }
  }
  return std::nullopt;
}

std::unique_ptr<StateDictAdapter> StateDictAdapterFor(const ModelConfig& config) {
  if (config.arch == Architecture::kGptOss) return MakeGptOssStateDictAdapter(config);
  return MakeLlamaStateDictAdapter();
}

}  // namespace air::engine
