// Parameter: one trainable tensor of a model, under its Hugging Face name, with its gradient.
// The trainer (optimizer, clipping, FSDP) works on the model's list of these.
// Thread safety: plain data; owned by the model.
#pragma once

#include <string>

#include "engine/tensor.h"

namespace air::engine {

struct Parameter {
  std::string name;  // HF tensor name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Tensor value;      // fp32 weights, HF shape ([out, in] for linear weights)
  Tensor grad;       // same shape once allocated; empty until ZeroGrads() or Backward()
  int layer = -1;    // decoder layer index, or -1 for embedding, final norm and lm_head
  // False for 1-D tensors (norm weights, biases): AdamW skips weight decay for them.
  bool decay = true;
};

// A parameter's name, shape and layer without its storage (what a checkpoint must contain).
struct ParameterSpec {
  std::string name;
  Shape shape;
  int layer = -1;
};

}  // namespace air::engine
