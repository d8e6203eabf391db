// Hugging Face checkpoints <-> a model's parameter views, through the model's state-dict
// adapter (io/state_dict_adapter.h: HF names live there, never in the model). The model
// (engine/model) knows nothing of io; io knows models through CausalLm only.
//
// Loading decodes each tensor on the host (BF16/F16 to fp32; GPT-OSS's MXFP4 experts one
// expert at a time) and copies it into the parameter's view through the backend (rounded to
// the view's dtype). Saving has one path whatever holds the
// weights: host tensors of every parameter in the model's order — read from the model's own
// storage (SaveHfModel) or gathered by FSDP unit by unit (the trainer) — are named by the adapter
// and written by io/checkpoint.h.
// Thread safety: functions; the model must not be driven concurrently.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "engine/io/checkpoint.h"
#include "engine/model/causal_lm.h"

namespace air::engine {

// Which parameters a load reads (every one when empty): a converter's own parameters (LoRA's
// adapters) are not in the base model's files.
using ParameterFilter = std::function<bool(const Parameter&)>;

// Checks that `reader` holds what a model of `config` needs, before any weight is read (GPT-OSS:
// one error listing every missing expert tensor by name; the Llama family: each load names its
// own missing tensor).
Status CheckHfCheckpoint(const WeightReader& reader, const ModelConfig& config);
// Loads every parameter (that `only` accepts) from `reader` (after CheckHfCheckpoint). A missing
// tensor or a shape mismatch is an error naming the HF tensor, the file(s), the expected and
// actual shape.
Status LoadHfWeights(const WeightReader& reader, CausalLm& model, const ParameterFilter& only = {});
// The same for the parameters of one unit (a decoder layer, or the root), which must have its
// storage (CausalLm::AllocateUnitStorage): FSDP's unit-at-a-time load.
Status LoadHfUnit(const WeightReader& reader, CausalLm& model, int unit,
                  const ParameterFilter& only = {});

// Reads DIR/config.json and the safetensors weights in DIR (single or sharded) into a new model
// of the architecture config.json names, on `backend`.
Result<std::unique_ptr<CausalLm>> LoadHfModel(const std::string& model_dir,
                                              std::shared_ptr<Backend> backend,
                                              const ModelOptions& options = {});

// Writes a checkpoint transformers loads (config.json, weights, generation_config.json) from
// `values`: one host tensor per parameter of `model`, in the model's order (those `only`
// accepts: a converter's own parameters are left out of a base model's files).
Status SaveHfTensors(const CausalLm& model, const std::vector<Tensor>& values,
                     const std::string& dir, const SaveOptions& options = {},
                     const ParameterFilter& only = {}, Env* env = DefaultEnv());
// SaveHfTensors of the model's own storage.
Status SaveHfModel(const CausalLm& model, const std::string& dir, const SaveOptions& options = {},
                   const ParameterFilter& only = {}, Env* env = DefaultEnv());

// The HF names of a model's parameters (in order), e.g. to check a checkpoint against them.
std::vector<std::string> HfParameterNames(const CausalLm& model);

}  // namespace air::engine
