// MXFP4 expert weights as GPT-OSS checkpoints store them, decoded to fp32 or bf16 bit for bit as
// transformers decodes them (integrations/mxfp4.py, convert_moe_packed_tensors).
//
// A quantized parameter NAME (e.g. model.layers.0.mlp.experts.gate_up_proj) is stored as two U8
// tensors:
//   NAME_blocks  [E, R, G, 16]  32 E2M1 values per (expert, row, group), two per byte, the low
//                               nibble first: value c = 2j of the group is byte j & 0xF, value
//                               c = 2j + 1 is byte j >> 4
//   NAME_scales  [E, R, G]      one E8M0 exponent per group of 32: the factor 2^(scale - 127)
// E2M1 nibbles are ±{0, 0.5, 1, 1.5, 2, 3, 4, 6} (bit 3 the sign, so nibble 8 is -0). transformers
// computes ldexp(lut[nibble], scale - 127) in the target dtype; every such value is exact in fp32
// and bf16 (subnormals included, down to 2^-128), except that values past the float range become
// ±inf (scale 254 and 255 with |lut| ≥ 2 and ≥ 1) — ldexp, not a multiplication by 2^(s-127), so
// 0 stays ±0 even for scale 255. air computes the same values.
//
// Layout: transformers reshapes the decoded values to [E, R, G*32] and transposes the last two
// axes, so the parameter is [E, C, R] with C = G*32: gate_up_proj_blocks [E, 2I, H/32, 16]
// becomes gate_up_proj [E, H, 2I] and down_proj_blocks [E, H, I/32, 16] becomes down_proj
// [E, I, H] (GptOssExperts' layout, x @ W). Mxfp4Orientation::kStored keeps [E, R, C] instead
// (the nn.Linear-style [out, in] per expert) for callers that want it.
// Decoding a range of experts [expert_begin, expert_end) writes only those experts' slices
// (FSDP loading one shard of a layer, or one expert at a time to bound memory).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "engine/io/checkpoint.h"
#include "engine/tensor.h"

namespace air::engine {

inline constexpr int64_t kMxfp4GroupSize = 32;   // values per scale
inline constexpr int64_t kMxfp4GroupBytes = 16;  // bytes per group in *_blocks

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

// The layout of blocks shaped [E, R, G, 16] with scales [E, R, G]; InvalidArgument naming
// `where` (the parameter or file) and both shapes otherwise.
Result<Mxfp4Layout> Mxfp4LayoutOf(const Shape& blocks, const Shape& scales,
                                  const std::string& where);

// The decoded tensor's shape for `orientation`.
Shape Mxfp4DecodedShape(const Mxfp4Layout& layout, Mxfp4Orientation orientation);

// The value of one (nibble, scale) pair in fp32: ldexp(E2M1(nibble), scale - 127).
float Mxfp4Value(uint8_t nibble, uint8_t scale);

// Decodes experts [expert_begin, expert_end) of `blocks` / `scales` (the full tensors' bytes)
// into `out`, which holds (expert_end - expert_begin) experts of the decoded shape, fp32 values
// or bf16 bit patterns. The range must lie within [0, E] (checked: aborts otherwise, a caller
// bug).
void DequantizeMxfp4F32(const Mxfp4Layout& layout, const uint8_t* blocks, const uint8_t* scales,
                        Mxfp4Orientation orientation, int64_t expert_begin, int64_t expert_end,
                        float* out);
void DequantizeMxfp4Bf16(const Mxfp4Layout& layout, const uint8_t* blocks, const uint8_t* scales,
                         Mxfp4Orientation orientation, int64_t expert_begin, int64_t expert_end,
                         uint16_t* out);

// The layout of NAME_blocks / NAME_scales in `reader` (both U8, shapes consistent). NotFound
// names the missing tensor and the files searched.
Result<Mxfp4Layout> FindMxfp4(const WeightReader& reader, const std::string& name);

// Reads NAME_blocks and NAME_scales from `reader` and decodes all experts to fp32 in
// `orientation` (transformers' parameter layout by default).
Result<Tensor> ReadMxfp4F32(const WeightReader& reader, const std::string& name,
                            Mxfp4Orientation orientation = Mxfp4Orientation::kTransformers);

}  // namespace air::engine
