// HF names <-> parameter views (see hf_state_dict.h).
#include "engine/io/hf_state_dict.h"

#include <vector>

#include "engine/io/hf_config.h"

namespace air::engine {

namespace {

Status LoadParameter(const WeightReader& reader, const Backend& backend, Parameter& p,
                     Tensor& host) {
  host.ResizeZeroed(p.shape);
  AIR_RETURN_IF_ERROR(reader.ReadInto(p.name, host));
  backend.CopyToDevice(p.value, host.data());
  return Status::Ok();
}

}  // namespace

Status LoadHfWeights(const WeightReader& reader, LlamaModel& model) {
  Tensor host;
  for (Parameter& p : model.parameters()) {
    AIR_RETURN_IF_ERROR(LoadParameter(reader, model.backend(), p, host));
  }
  return Status::Ok();
}

Status LoadHfUnit(const WeightReader& reader, LlamaModel& model, int unit) {
  ParamGroup& g = model.units()[static_cast<size_t>(unit)];
  if (g.values == nullptr) {
    return FailedPrecondition("LoadHfUnit: " + g.name + " has no storage to load into");
  }
  Tensor host;
  for (Parameter* p : g.params) {
    AIR_RETURN_IF_ERROR(LoadParameter(reader, model.backend(), *p, host));
  }
  return Status::Ok();
}

Result<std::unique_ptr<LlamaModel>> LoadHfModel(const std::string& model_dir,
                                                std::shared_ptr<Backend> backend,
                                                const ModelOptions& options) {
  AIR_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  AIR_ASSIGN_OR_RETURN(auto model, LlamaModel::Create(config, std::move(backend), options));
  AIR_ASSIGN_OR_RETURN(auto reader, WeightReader::Open(model_dir));
  AIR_RETURN_IF_ERROR(LoadHfWeights(*reader, *model));
  return model;
}

Status SaveHfModel(const LlamaModel& model, const std::string& dir, const SaveOptions& options) {
  const auto& params = model.parameters();
  std::vector<Tensor> host;
  host.reserve(params.size());
  for (const Parameter& p : params) host.push_back(model.backend().ToHostTensor(p.value));
  std::vector<NamedTensorRef> refs;
  refs.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) refs.push_back({params[i].name, &host[i]});
  return SaveHfCheckpoint(dir, model.config(), refs, options);
}

}  // namespace air::engine
