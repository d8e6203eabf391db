// Parameter and ParamGroup: a model's weights as named views into flat per-unit buffers.
//
// Parameters are grouped into FSDP units (torchtitan's apply_fsdp granularity): one unit per
// decoder layer, plus the root unit (embedding, final norm, head). A unit's values are flat
// storage on the model's backend in two segments — its frozen parameters (trainable = false:
// LoRA's base weights), then its trainable ones, each segment in model order — and each
// parameter's value is a view at its offset (llm.c's single parameter buffer with offsets). The
// model's own storage is one F32 buffer holding both segments back to back; FSDP binds each
// segment where it keeps it, in any float dtype (the frozen base in its param_dtype storage, the
// trainable part's compute copy), so it can shard, all-gather and free a unit as contiguous
// ranges and re-point the views. A unit's gradients are a third flat buffer (F32) that holds only
// its trainable parameters, in the trainable segment's order; a frozen parameter has no
// gradient view, gets no weight-gradient GEMM and no optimizer state.
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
  // Every write of this gradient is a weight-gradient GEMM that can overwrite (beta 0): a linear
  // layer's weight (LinearBackward) or an untied head's. Zeroing a unit's gradients skips it
  // and marks it unwritten instead (CausalLm::ZeroUnitGradients): PyTorch's zero_grad(
  // set_to_none=True), where the first backward writes the gradient rather than adding to it.
  bool grad_overwrites = false;
  // This step's gradient is not written yet (its memory holds stale values): the next write
  // overwrites it (GradientBeta). Whatever no write reached is zeroed after the unit's backward.
  bool grad_unwritten = false;

  int64_t numel() const { return NumElements(shape); }
};

// The beta of a weight-gradient GEMM adding into p's gradient: 0 for the step's first write
// (which clears p.grad_unwritten), else 1.
inline float GradientBeta(Parameter& p) {
  if (!p.grad_unwritten) return 1.0f;
  p.grad_unwritten = false;
  return 0.0f;
}

// Where a layer's backward writes p's weight gradient: an empty view (no weight-gradient GEMM)
// when p is absent (an optional weight such as a bias) or frozen.
inline View GradOrEmpty(const Parameter* p) {
  return p != nullptr && p->trainable ? p->grad : View();
}

// One FSDP unit: the parameters whose memory is one contiguous buffer.
struct ParamGroup {
  std::string name;                // "layers.3" or "root"
  std::vector<Parameter*> params;  // in the model's order
  int64_t numel = 0;               // elements of every parameter
  int64_t frozen_numel = 0;        // elements of the frozen ones (the first segment)
  int64_t trainable_numel = 0;     // elements of the trainable ones (the second; the gradients)
  std::unique_ptr<Buffer> values;  // numel F32 (the model's own storage: both segments)
  std::unique_ptr<Buffer> grads;   // trainable_numel F32; null until gradients are allocated
  View values_view;                // the model's own value buffer, flat (numel); empty when bound
  View frozen_view;                // where the frozen segment is bound (frozen_numel)
  View trainable_view;             // where the trainable segment is bound (trainable_numel)
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
  bool trainable = true;
};

}  // namespace air::engine
