// ParamView: what the optimizer and the clipper need to know about one trainable tensor (or a
// rank's piece of one) — its name, its shape, whether weight decay applies, and views of its
// fp32 master values and fp32 gradient (both `numel` floats, in the memory of the model's
// backend: only that backend's ops may touch them). The model owns the memory; a ParamView is
// valid as long as the model is alive and its gradient buffers are not laid out again
// (ViewsOf() maps a model's trainable parameters; their grads must be allocated first, e.g.
// by ZeroGrads()). Frozen parameters have no view: no clipping term, no optimizer state.
// Plain value type; not thread-safe (the pointees are mutated by training).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/parameter.h"
#include "engine/view.h"

namespace air::engine::train {

struct ParamView {
  std::string name;            // the model's, e.g. "layers.0.attention.wq.weight"
  std::vector<int64_t> shape;  // e.g. {out, in}
  View value;                  // F32, numel
  View grad;                   // F32, numel
  int64_t numel = 0;
  // Weight decay is applied to matrices and embeddings (2+ dims), not to norms or biases (1 dim),
  // as transformers' Trainer does for Llama-family models.
  bool decay = true;
  // The compute copy the optimizer writes with each update (numel, param_dtype: a bf16 run's
  // resident parameters under NO_SHARD), or empty: none, or one the sharding refreshes itself.
  View compute;
};

// Views of every trainable parameter of a model, in the model's order. The grads must be
// allocated.
std::vector<ParamView> ViewsOf(std::vector<Parameter>& params);

}  // namespace air::engine::train
