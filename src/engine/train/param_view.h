// ParamView: what the optimizer and the clipper need to know about one trainable tensor — its
// Hugging Face name, its shape, whether weight decay applies, and raw pointers to its fp32 values
// and its fp32 gradient (both `numel` floats, contiguous). The model owns the memory; a ParamView
// is valid as long as the model is alive and its tensors are not reallocated (ViewsOf() maps a
// model's engine::Parameter list; its grads must be allocated first, e.g. by ZeroGrads()).
// Plain value type; not thread-safe (the pointees are mutated by training).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/parameter.h"

namespace air::engine::train {

struct ParamView {
  std::string name;            // e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // e.g. {out, in}
  float* value = nullptr;
  float* grad = nullptr;
  int64_t numel = 0;
  // Weight decay is applied to matrices and embeddings (2+ dims), not to norms or biases (1 dim),
  // as transformers' Trainer does for Llama-family models.
  bool decay = true;
};

// Views of every parameter of a model, in the model's order. The grads must be allocated.
std::vector<ParamView> ViewsOf(std::vector<Parameter>& params);

}  // namespace air::engine::train
