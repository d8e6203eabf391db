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

namespace {

// scaling * B in a new F32 buffer (held by the returned buffer; the view through `scaled`).
Result<std::unique_ptr<Buffer>> ScaledCopy(const Backend& ops, const Parameter& b, float scaling,
                                           View* scaled) {
  AIR_ASSIGN_OR_RETURN(auto buffer, ops.AllocateView(DType::kF32, b.shape, scaled));
  ops.Copy(*scaled, b.value);
  ops.Scale(*scaled, scaling);
  return buffer;
}

}  // namespace

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
    AIR_ASSIGN_OR_RETURN(auto buffer, ScaledCopy(ops, b, scaling, &scaled));
    ops.Gemm(false, false, out, in, r, scaled, r, a.value, in, 1.0f, w.value, in);
    l.linear->adapter = nullptr;
  }
  for (const NamedExpertLinear& l : model.ExpertLinears()) {
    auto* adapter = dynamic_cast<ExpertLora*>(l.linear->adapter);
    if (adapter == nullptr) continue;
    const Parameter& w = *l.linear->weight;
    const Parameter& a = *adapter->a();
    const Parameter& b = *adapter->b();
    const int64_t experts = w.shape[0], in = w.shape[1], out = w.shape[2], r = b.shape[2];
    View scaled;
    AIR_ASSIGN_OR_RETURN(auto buffer, ScaledCopy(ops, b, scaling, &scaled));
    for (int64_t e = 0; e < experts; ++e) {
      // delta_e (in, out) = A_e (r, in)^T @ (scaling B_e) (out, r)^T, added into W_e (in, out):
      // PEFT's ParamWrapper delta for a weight stored (E, in, out).
      ops.Gemm(true, true, in, out, r, a.value.Slice(e * r * in, r * in), in,
               scaled.Slice(e * out * r, out * r), r, 1.0f, w.value.Slice(e * in * out, in * out),
               out);
    }
    l.linear->adapter = nullptr;
  }
  return Status::Ok();
}

Status SaveBaseModel(const CausalLm& model, const std::string& dir) {
  return SaveHfModel(model, dir, {}, BaseWeightsOnly());
}

}  // namespace air::engine::lora
