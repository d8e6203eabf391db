// StateDictAdapter: the map between a model's own parameter names (model/causal_lm.h) and a
// checkpoint format's — torchtitan's state_dict_adapter. Hugging Face names live here, not in
// the model: Llama's "layers.0.attention.wq.weight" is transformers'
// "model.layers.0.self_attn.q_proj.weight". Every load and save of HF files (hf_state_dict.h)
// and every name a user sees in an HF context (a missing tensor, a PEFT module path) goes
// through one. A format that stores a parameter otherwise than as one float tensor of its name
// (GPT-OSS's MXFP4 experts as *_blocks / *_scales) decodes it in LoadInto; Check lists what a
// checkpoint lacks before anything loads.
// Adapters: the Llama family (llama_state_dict_adapter.cc), GPT-OSS
// (gpt_oss_state_dict_adapter.cc); StateDictAdapterFor picks by architecture.
// Thread safety: immutable after construction.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/io/checkpoint.h"
#include "engine/model/model_config.h"
#include "engine/tensor.h"

namespace air::engine {

class StateDictAdapter {
 public:
  virtual ~StateDictAdapter() = default;
  // The HF tensor name of a model parameter (every parameter has one).
  virtual std::string ToHf(const std::string& name) const = 0;
  // The model parameter an HF tensor name is, or nullopt for a name the model has no parameter
  // for.
  virtual std::optional<std::string> FromHf(const std::string& hf_name) const = 0;
  // Loads model parameter `name` (shape `shape`) from `reader` into `value` on `backend`
  // (rounded to the view's dtype); `scratch` is host memory to reuse. Default: the float tensor
  // ToHf(name), whose absence or other shape is an error naming it and the files.
  virtual Status LoadInto(const WeightReader& reader, const std::string& name, const Shape& shape,
                          const Backend& backend, const View& value, Tensor& scratch) const;
  // Checks, before any weight is read, that `reader` holds what this architecture needs (an
  // error listing every missing tensor). Default: OK (each load names its own).
  virtual Status Check(const WeightReader& reader) const;
};

// An adapter that renames through two tables: whole names of the root unit's tensors, and the
// pieces after "layers.L." <-> "model.layers.L.", each either a module (matching "piece." and
// keeping the rest, e.g. "attention.wq" + ".weight") or a whole parameter name.
class TableStateDictAdapter : public StateDictAdapter {
 public:
  using Pairs = std::vector<std::pair<std::string, std::string>>;  // (model, HF)
  TableStateDictAdapter(Pairs root, Pairs layer)
      : root_(std::move(root)), layer_(std::move(layer)) {}
  std::string ToHf(const std::string& name) const override;
  std::optional<std::string> FromHf(const std::string& hf_name) const override;

 private:
  std::optional<std::string> Translate(const std::string& rest, bool to_hf) const;
  Pairs root_, layer_;
};

// The adapter of the architecture `config` describes.
std::unique_ptr<StateDictAdapter> StateDictAdapterFor(const ModelConfig& config);
// The two adapters (used by StateDictAdapterFor).
std::unique_ptr<StateDictAdapter> MakeLlamaStateDictAdapter();
std::unique_ptr<StateDictAdapter> MakeGptOssStateDictAdapter(const ModelConfig& config);

}  // namespace air::engine
