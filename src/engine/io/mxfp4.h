// MXFP4 expert weights as GPT-OSS checkpoints store them: finding and reading the U8 tensors
// NAME_blocks [E, R, G, 16] and NAME_scales [E, R, G] of a quantized parameter NAME (e.g.
// model.layers.0.mlp.experts.gate_up_proj) in a checkpoint, and decoding them on the host bit for
// bit as transformers does (engine/mxfp4_decode.h has the format, the layouts and the decoder;
// a backend decodes in its own memory with Ops::DequantizeMxfp4).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "engine/io/checkpoint.h"
#include "engine/mxfp4_decode.h"
#include "engine/tensor.h"

namespace air::engine {

// The layout of blocks shaped [E, R, G, 16] with scales [E, R, G]; InvalidArgument naming
// `where` (the parameter or file) and both shapes otherwise.
Result<Mxfp4Layout> Mxfp4LayoutOf(const Shape& blocks, const Shape& scales,
                                  const std::string& where);

// The layout of NAME_blocks / NAME_scales in `reader` (both U8, shapes consistent). NotFound
// names the missing tensor and the files searched.
Result<Mxfp4Layout> FindMxfp4(const WeightReader& reader, const std::string& name);

// Reads NAME_blocks and NAME_scales from `reader` and decodes all experts to fp32 in
// `orientation` (transformers' parameter layout by default).
Result<Tensor> ReadMxfp4F32(const WeightReader& reader, const std::string& name,
                            Mxfp4Orientation orientation = Mxfp4Orientation::kTransformers);

}  // namespace air::engine
