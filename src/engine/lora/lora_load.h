// A base model with a PEFT adapter, for `air generate --adapter`, `air lora merge` and the
// parity tools: the base read from its HF directory, LoRA applied as the adapter's
// adapter_config.json says (lora_model.h), its tensors checked and read (peft_files.h). The
// adapter stays unmerged — y = base(x) + B(A(x))·scaling, as PeftModel computes — until
// MergeAdapters folds it in (PEFT's merge_and_unload: W += B·A·scaling, in fp32).
// Thread safety: one thread drives the model.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "engine/lora/lora_model.h"
#include "engine/model/causal_lm.h"

namespace air::engine::lora {

struct ModelWithAdapter {
  std::unique_ptr<CausalLm> model;
  std::unique_ptr<Lora> lora;  // after the model: destroyed first
  std::string adapter_dir;
};

// Loads `model_dir` (fp32 storage) and the adapter in `adapter_dir`. Errors name the adapter's
// file and the first tensor that does not fit the model.
Result<ModelWithAdapter> LoadModelWithAdapter(const std::string& model_dir,
                                              const std::string& adapter_dir,
                                              std::shared_ptr<Backend> backend);

// W += scaling · B A for every adapter (an expert adapter's: W_e += scaling · A_e^T B_e^T, PEFT's
// ParamWrapper merge), on the backend, in the model's own fp32 storage; the adapters are
// detached (the model then computes the merged weights alone).
Status MergeAdapters(ModelWithAdapter& loaded);

// Writes the model's base parameters (LoRA's own left out) as an HF checkpoint in `dir`.
Status SaveBaseModel(const CausalLm& model, const std::string& dir);

}  // namespace air::engine::lora
