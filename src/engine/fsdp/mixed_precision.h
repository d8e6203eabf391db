// MixedPrecision: FSDP's policy, with FSDP1's names (torch.distributed.fsdp.MixedPrecision):
//   param_dtype   the dtype parameters are gathered in and computed with (the activations too);
//                 the sharded master copy and AdamW's state stay fp32 (unless the parameters
//                 are kept in bf16 themselves: torch_dtype, FsdpOptions::state_dtype)
//   reduce_dtype  the dtype gradients travel in for the reduce-scatter / all-reduce; the reduced
//                 shard is accumulated into the fp32 gradient shard
//   buffer_dtype  the dtype of the model's buffers (RoPE's inverse frequencies)
// RMSNorm, softmax, the loss and the optimizer compute in fp32 whatever the policy; the saved HF
// checkpoint holds the fp32 master weights (FSDP's full state dict). docs/engine-training.md
// compares each rule with FSDP1, FSDP2 and Accelerate.
// Thread safety: plain values and pure functions.
#pragma once

#include <optional>
#include <string>

#include "engine/dtype.h"

namespace air::engine::fsdp {

struct MixedPrecision {
  DType param_dtype = DType::kF32;
  DType reduce_dtype = DType::kF32;
  DType buffer_dtype = DType::kF32;

  bool enabled() const {
    return param_dtype != DType::kF32 || reduce_dtype != DType::kF32 || buffer_dtype != DType::kF32;
  }
  bool operator==(const MixedPrecision&) const = default;
};

// What HF's `bf16: true` sets under FSDP (Accelerate's FullyShardedDataParallelPlugin
// .set_mixed_precision("bf16") for FSDP1): param, reduce and buffer dtype bfloat16.
MixedPrecision Bf16Policy();

// "float32" | "fp32" | "bfloat16" | "bf16" | "float16" | "fp16" (torch's names, any case) ->
// the dtype; nullopt otherwise.
std::optional<DType> ParseTorchDType(const std::string& name);
// "fp32", or "bf16 mixed precision (bf16 parameters, bf16 reductions, bf16 buffers; fp32
// master weights and AdamW)", the state's dtype named last (`state`: the torch_dtype the
// parameters are kept in, FsdpOptions::state_dtype): for the plan a run prints.
std::string DescribePrecision(const MixedPrecision& mp, DType state = DType::kF32);
// "float32", "bfloat16", "float16".
const char* TorchDTypeName(DType dtype);
// "float32, bfloat16 (float16 is named but has no compute path)": for error messages.
std::string TorchDTypeNames();

}  // namespace air::engine::fsdp
