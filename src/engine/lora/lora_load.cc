// A base model with a PEFT adapter, merged or not (see lora_load.h).
#include "engine/lora/lora_load.h"

#include <fmt/format.h>

#include "engine/io/checkpoint.h"
#include "engine/io/hf_config.h"
#include "engine/io/hf_state_dict.h"
#include "engine/io/state_dict_adapter.h"
#include "engine/lora/peft_files.h"
#include "engine/model/model_factory.h"

namespace air::engine::lora {

Result<ModelWithAdapter> LoadModelWithAdapter(const std::string& model_dir,
                                              const std::string& adapter_dir,
                                              std::shared_ptr<Backend> backend) {
  AIR_ASSIGN_OR_RETURN(PeftAdapterConfig adapter, ReadPeftAdapterConfig(adapter_dir));
  AIR_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  ModelOptions options;
  options.deferred_storage = true;  // the adapters join the units before storage exists
  ModelWithAdapter out;
  out.adapter_dir = adapter_dir;
  AIR_ASSIGN_OR_RETURN(out.model, CreateModel(config, std::move(backend), options));
  const std::string file = adapter_dir + "/" + kAdapterConfigName;
  const auto where = [&](const std::string& key) { return file + ": " + key; };
  AIR_ASSIGN_OR_RETURN(LoraPlan plan, PlanLora(adapter.lora, *out.model, where));
  AIR_ASSIGN_OR_RETURN(out.lora, Lora::Apply(*out.model, adapter.lora, plan));
  AIR_ASSIGN_OR_RETURN(auto reader, PeftAdapterReader::Open(adapter_dir, *out.model, *out.lora));
  for (int u = 0; u <= out.model->root_unit(); ++u) {
    AIR_RETURN_IF_ERROR(out.model->AllocateUnitStorage(u));
  }
  AIR_ASSIGN_OR_RETURN(auto weights, WeightReader::Open(model_dir));
  AIR_RETURN_IF_ERROR(LoadHfWeights(*weights, *out.model, BaseWeightsOnly()));
  AIR_RETURN_IF_ERROR(reader->LoadUnit(*out.model, *out.lora, -1));
  return out;
}

Status MergeAdapters(ModelWithAdapter& loaded) {
  CausalLm& model = *loaded.model;
  const Backend& ops = model.backend();
  const float scaling = loaded.lora->config().Scaling();
  for (const NamedLinear& l : model.Linears()) {
    auto* adapter = dynamic_cast<LoraLinear*>(l.linear->adapter);
    if (adapter == nullptr) continue;
    const Parameter& w = *l.linear->weight;
    const Parameter& a = *adapter->a();
    const Parameter& b = *adapter->b();
    const int64_t out = w.shape[0], in = w.shape[1], r = a.shape[0];
    // delta = (scaling B) (out, r) @ A (r, in), added into W (out, in).
    View scaled;
    AIR_ASSIGN_OR_RETURN(auto buffer, ops.AllocateView(DType::kF32, b.shape, &scaled));
    ops.Copy(scaled, b.value);
    ops.Scale(scaled, scaling);
    ops.Gemm(false, false, out, in, r, scaled, r, a.value, in, 1.0f, w.value, in);
    l.linear->adapter = nullptr;
  }
  return Status::Ok();
}

Status SaveBaseModel(const CausalLm& model, const std::string& dir) {
  return SaveHfModel(model, dir, {}, BaseWeightsOnly());
}

}  // namespace air::engine::lora
