// The tensors of a GptOssForCausalLM checkpoint, by Hugging Face name, and a check that a
// checkpoint directory (single file or sharded with model.safetensors.index.json, read through
// WeightReader) holds all of them with the right shapes.
//
// Per layer l (P = "model.layers.l."), as transformers' GptOssForCausalLM state dict has them:
//   P input_layernorm.weight [H]        P post_attention_layernorm.weight [H]
//   P self_attn.{q,k,v,o}_proj.weight   q [nH*D, H], k/v [nKV*D, H], o [H, nH*D]
//   P self_attn.{q,k,v,o}_proj.bias     (when attention_bias) q [nH*D], k/v [nKV*D], o [H]
//   P self_attn.sinks [nH]
//   P mlp.router.weight [E, H]          P mlp.router.bias [E]
//   P mlp.experts.gate_up_proj_bias [E, 2I]   P mlp.experts.down_proj_bias [E, H]
// and the expert weights in one of two formats:
//   dense (bf16/fp32):  P mlp.experts.gate_up_proj [E, H, 2I], P mlp.experts.down_proj [E, I, H]
//   mxfp4 (released):   P mlp.experts.gate_up_proj_blocks [E, 2I, H/32, 16] U8 + _scales
//                       [E, 2I, H/32] U8; P mlp.experts.down_proj_blocks [E, H, I/32, 16] U8 +
//                       _scales [E, H, I/32] U8 (io/mxfp4.h decodes them)
// plus model.embed_tokens.weight [V, H], model.norm.weight [H] and lm_head.weight [V, H] (absent
// when tie_word_embeddings).
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/io/checkpoint.h"
#include "engine/model/gpt_oss_config.h"
#include "engine/tensor.h"

namespace air::engine {

enum class GptOssExpertFormat {
  kDense,  // gate_up_proj / down_proj as float tensors
  kMxfp4,  // *_blocks / *_scales as U8
};

struct GptOssTensorSpec {
  std::string name;
  Shape shape;
  bool packed = false;  // U8 (MXFP4 blocks or scales); else a float tensor (F32/BF16/F16)
  bool expert = false;  // under mlp.experts (weights, dense or packed, and their biases)
};

// The tensors of layer `layer`, in the order above.
std::vector<GptOssTensorSpec> GptOssLayerTensors(const GptOssConfig& config, int64_t layer,
                                                 GptOssExpertFormat format);
// Every tensor of the checkpoint: embed_tokens, the layers, norm, lm_head.
std::vector<GptOssTensorSpec> GptOssCheckpointTensors(const GptOssConfig& config,
                                                      GptOssExpertFormat format);

// The expert format of the weights in `reader`: mxfp4 when the config says so
// (quantization_config mxfp4) or layer 0 holds gate_up_proj_blocks, else dense.
GptOssExpertFormat GptOssExpertFormatOf(const WeightReader& reader, const GptOssConfig& config);

// Checks that `reader` holds every tensor GptOssCheckpointTensors() lists for its format, with
// that shape and storage (U8 for packed tensors, a float type otherwise). One error lists every
// problem: the missing expert tensors (mlp.experts.*) by name, then other missing tensors, then
// wrong shapes or types (each with expected and actual), at most `max_listed` names per kind plus
// a count.
Status CheckGptOssCheckpoint(const WeightReader& reader, const GptOssConfig& config,
                             size_t max_listed = 16);

}  // namespace air::engine
