// HF checkpoints <-> parameter views through the state-dict adapter (see hf_state_dict.h).
#include "engine/io/hf_state_dict.h"

#include <vector>

#include "engine/io/hf_config.h"
#include "engine/io/state_dict_adapter.h"
#include "engine/model/model_factory.h"

namespace air::engine {

namespace {

Status LoadParameter(const WeightReader& reader, const StateDictAdapter& adapter,
                     const Backend& backend, Parameter& p, Tensor& host) {
  return adapter.LoadInto(reader, p.name, p.shape, backend, p.value, host);
}

}  // namespace

Status CheckHfCheckpoint(const WeightReader& reader, const ModelConfig& config) {
  return StateDictAdapterFor(config)->Check(reader);
}

Status LoadHfWeights(const WeightReader& reader, CausalLm& model, const ParameterFilter& only) {
  const auto adapter = StateDictAdapterFor(model.config());
  AIR_RETURN_IF_ERROR(adapter->Check(reader));
  Tensor host;
  for (Parameter& p : model.parameters()) {
    if (only && !only(p)) continue;
    AIR_RETURN_IF_ERROR(LoadParameter(reader, *adapter, model.backend(), p, host));
  }
  return Status::Ok();
}

Status LoadHfUnit(const WeightReader& reader, CausalLm& model, int unit,
                  const ParameterFilter& only) {
  ParamGroup& g = model.units()[static_cast<size_t>(unit)];
  if (g.values_view.empty() && g.numel > 0) {
    return FailedPrecondition("LoadHfUnit: " + g.name + " has no storage to load into");
  }
  const auto adapter = StateDictAdapterFor(model.config());
  Tensor host;
  for (Parameter* p : g.params) {
    if (only && !only(*p)) continue;
    AIR_RETURN_IF_ERROR(LoadParameter(reader, *adapter, model.backend(), *p, host));
  }
  return Status::Ok();
}

Result<std::unique_ptr<CausalLm>> LoadHfModel(const std::string& model_dir,
                                              std::shared_ptr<Backend> backend,
                                              const ModelOptions& options) {
  AIR_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  AIR_ASSIGN_OR_RETURN(auto model, CreateModel(config, std::move(backend), options));
  AIR_ASSIGN_OR_RETURN(auto reader, WeightReader::Open(model_dir));
  AIR_RETURN_IF_ERROR(LoadHfWeights(*reader, *model));
  return model;
}

std::vector<std::string> HfParameterNames(const CausalLm& model) {
  const auto adapter = StateDictAdapterFor(model.config());
  std::vector<std::string> names;
  for (const Parameter& p : model.parameters()) names.push_back(adapter->ToHf(p.name));
  return names;
}

Status SaveHfTensors(const CausalLm& model, const std::vector<Tensor>& values,
                     const std::string& dir, const SaveOptions& options,
                     const ParameterFilter& only, Env* env) {
  const auto& params = model.parameters();
  if (values.size() != params.size()) {
    return Internal("SaveHfTensors: " + std::to_string(values.size()) + " tensors for " +
                    std::to_string(params.size()) + " parameters");
  }
  const std::vector<std::string> names = HfParameterNames(model);
  std::vector<NamedTensorRef> refs;
  refs.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!only || only(params[i])) refs.push_back({names[i], &values[i]});
  }
  return SaveHfCheckpoint(dir, model.config(), refs, options, env);
}

Status SaveHfModel(const CausalLm& model, const std::string& dir, const SaveOptions& options,
                   const ParameterFilter& only, Env* env) {
  std::vector<Tensor> host;
  host.reserve(model.parameters().size());
  for (const Parameter& p : model.parameters()) {
    host.push_back(!only || only(p) ? model.backend().ToHostTensor(p.value) : Tensor());
  }
  return SaveHfTensors(model, host, dir, options, only, env);
}

}  // namespace air::engine
