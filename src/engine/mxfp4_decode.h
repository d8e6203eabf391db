// Decoding MXFP4 expert weights (GPT-OSS's released checkpoints) on the host, bit for bit as
// transformers decodes them (integrations/mxfp4.py, convert_moe_packed_tensors): the CPU
// backends' DequantizeMxfp4 op (ops.h) and the host-side readers of io/mxfp4.h. The per-value
// rule (Mxfp4Value) is op_semantics.h's, which the CUDA kernel shares.
//
// A quantized parameter is two byte arrays:
//   blocks  [E, R, G, 16]  32 E2M1 values per (expert, row, group), two per byte, the low
//                          nibble first: value c = 2j of the group is byte j & 0xF, value
//                          c = 2j + 1 is byte j >> 4
//   scales  [E, R, G]      one E8M0 exponent per group of 32: the factor 2^(scale - 127)
// Every value is exact in fp32 and bf16 (or ±inf: scales 254 and 255 with large nibbles).
//
// Layout: transformers reshapes the decoded values to [E, R, G*32] and transposes the last two
// axes, so the parameter is [E, C, R] with C = G*32 (Mxfp4Orientation::kTransformers:
// gate_up_proj [E, H, 2I], down_proj [E, I, H], GptOssExperts' x @ W layout);
// Mxfp4Orientation::kStored keeps [E, R, C] (the nn.Linear-style [out, in] per expert).
// Decoding a range of experts [expert_begin, expert_end) writes only those experts' slices
// (FSDP loading one shard of a layer, or one expert at a time to bound memory).
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "engine/ops/op_semantics.h"  // Mxfp4Value
#include "engine/tensor.h"

namespace air::engine {

inline constexpr int64_t kMxfp4GroupSize = 32;   // values per scale
inline constexpr int64_t kMxfp4GroupBytes = 16;  // bytes per group in the blocks

// The sizes of one quantized parameter.
struct Mxfp4Layout {
  int64_t experts = 0;  // E
  int64_t rows = 0;     // R: the stored matrix's rows (2I for gate_up_proj, H for down_proj)
  int64_t groups = 0;   // G: groups of 32 along the stored matrix's columns
  int64_t cols() const { return groups * kMxfp4GroupSize; }
  int64_t numel() const { return experts * rows * cols(); }
};

enum class Mxfp4Orientation {
  kTransformers,  // [E, C, R]: the parameter transformers builds (gate_up_proj [E, H, 2I])
  kStored,        // [E, R, C]: the matrix as stored, rows first
};

// The decoded tensor's shape for `orientation`.
Shape Mxfp4DecodedShape(const Mxfp4Layout& layout, Mxfp4Orientation orientation);

// Decodes experts [expert_begin, expert_end) of `blocks` / `scales` (the full arrays' bytes)
// into `out`, which holds (expert_end - expert_begin) experts of the decoded shape, fp32 values
// or bf16 bit patterns. The range must lie within [0, E] (checked: aborts otherwise, a caller
// bug).
void DequantizeMxfp4F32(const Mxfp4Layout& layout, const uint8_t* blocks, const uint8_t* scales,
                        Mxfp4Orientation orientation, int64_t expert_begin, int64_t expert_end,
                        float* out);
void DequantizeMxfp4Bf16(const Mxfp4Layout& layout, const uint8_t* blocks, const uint8_t* scales,
                         Mxfp4Orientation orientation, int64_t expert_begin, int64_t expert_end,
                         uint16_t* out);

}  // namespace air::engine
