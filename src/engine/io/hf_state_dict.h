// The Hugging Face state-dict adapter (torchtitan's state_dict_adapter): maps the tensors of a
// transformers checkpoint, by HF name, to the model's parameter views and back, so that file
// formats stay out of the model. The model (engine/model) knows nothing of io; io knows the
// model through this file only (one direction: no include cycle).
//
// Today the model's parameter names are the HF names, so the mapping is the identity except
// for tied embeddings (a stored lm_head.weight is ignored; the head is the embedding). A
// converter that renames or reshapes (fused qkv, LoRA adapters saved under peft's names) goes
// here, as a rule per name.
//
// Loading decodes each tensor on the host (BF16/F16 to fp32) and copies it to the parameter's
// view through the backend; saving copies each view to the host and writes the checkpoint
// (io/checkpoint.h).
// Thread safety: functions; the model must not be driven concurrently.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "engine/io/checkpoint.h"
#include "engine/model/llama_model.h"

namespace air::engine {

// Loads every parameter from `reader`. A missing tensor or a shape mismatch is an error naming
// the tensor, the file(s), the expected and actual shape.
Status LoadHfWeights(const WeightReader& reader, LlamaModel& model);
// The same for the parameters of one unit (a decoder layer, or the root), which must have its
// storage (LlamaModel::AllocateUnitStorage): FSDP's unit-at-a-time load.
Status LoadHfUnit(const WeightReader& reader, LlamaModel& model, int unit);

// Reads DIR/config.json and the safetensors weights in DIR (single or sharded) into a new model
// on `backend`.
Result<std::unique_ptr<LlamaModel>> LoadHfModel(const std::string& model_dir,
                                                std::shared_ptr<Backend> backend,
                                                const ModelOptions& options = {});

// Writes a checkpoint transformers loads (config.json, weights, generation_config.json).
Status SaveHfModel(const LlamaModel& model, const std::string& dir,
                   const SaveOptions& options = {});

}  // namespace air::engine
