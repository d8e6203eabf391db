// Parameter and ParamGroup: a model's weights as named views into flat per-unit buffers.
//
// Parameters are grouped into FSDP units (torchtitan's apply_fsdp granularity): one unit per
// decoder layer, plus the root unit (embedding, final norm, head). Each unit's values are ONE
// flat buffer on the model's backend — the model's own F32 buffer, or one FSDP bound in any float
// dtype (a bf16 compute copy under mixed precision) — and each parameter's value is a view into
// it (llm.c's single parameter buffer with offsets), so FSDP can shard, all-gather and free a
// unit as one contiguous range and re-point the views. A unit's gradients are a second flat buffer
// that holds only its trainable parameters, in the same order; a frozen parameter (trainable =
// false: LoRA's base weights) has no gradient view, gets no weight-gradient GEMM and no
// optimizer state.
//
// Thread safety: plain data; owned by the model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "engine/view.h"

namespace air::engine {

struct Parameter {
  std::string name;  // the model's name, e.g. "layers.0.attention.wq.weight" (io's adapter maps
                     // it to the checkpoint format's: "model.layers.0.self_attn.q_proj.weight")
  Shape shape;       // HF shape ([out, in] for linear weights)
  int layer = -1;    // decoder layer index, or -1 for embedding, final norm and lm_head
  int unit = 0;      // index into the model's units(): the layer, or the root unit
  // False for 1-D tensors (norm weights, biases): AdamW skips weight decay for them.
  bool decay = true;
  // False: frozen (no gradient, no weight-gradient GEMM, no optimizer state).
  bool trainable = true;
  View value;  // into its unit's value buffer, in that buffer's dtype
  View grad;   // F32, into its unit's gradient buffer; empty when frozen or not yet allocated

  int64_t numel() const { return NumElements(shape); }
};

// One FSDP unit: the parameters whose memory is one contiguous buffer.
struct ParamGroup {
  std::string name;                // "model.layers.3" or "root"
  std::vector<Parameter*> params;  // in the model's (HF) order
  int64_t numel = 0;               // elements of every parameter
  int64_t trainable_numel = 0;     // elements of the trainable ones (the gradient buffer)
  std::unique_ptr<Buffer> values;  // numel F32 (the model's own storage)
  std::unique_ptr<Buffer> grads;   // trainable_numel F32; null until gradients are allocated
  View values_view;                // the whole value buffer, flat (numel)
  View grads_view;                 // the whole gradient buffer, flat; empty when null
  // True once FSDP (engine/fsdp) owns the unit's storage (LlamaModel::ReleaseUnitStorage): the
  // model's buffers are gone and the views point wherever the last BindUnit put them.
  bool external = false;
};

// A parameter's name, shape and layer without its storage (what a checkpoint must contain).
struct ParameterSpec {
  std::string name;
  Shape shape;
  int layer = -1;
};

}  // namespace air::engine
