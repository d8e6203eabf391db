// Activation checkpointing, applied to a model from outside as FSDP is (torchtitan's
// apply_ac): the checkpointed decoder layers keep only their input during the forward and
// recompute their activations in the backward (CausalLm::set_checkpointed_layers). Gradients
// are bit-identical with and without it; memory drops from every layer's activations to one
// layer's plus the layer inputs.
// Thread safety: call before training, from the thread that drives the model.
#pragma once

#include "engine/model/causal_lm.h"

namespace air::engine::train {

// Every decoder layer (`enabled`), or none.
inline void ApplyActivationCheckpointing(CausalLm& model, bool enabled) {
  model.set_checkpointed_layers(
      std::vector<bool>(static_cast<size_t>(model.config().num_layers), enabled));
}

}  // namespace air::engine::train
