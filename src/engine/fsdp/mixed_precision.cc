// Mixed-precision policy names (see mixed_precision.h).
#include "engine/fsdp/mixed_precision.h"

#include <algorithm>
#include <cctype>

namespace air::engine::fsdp {

MixedPrecision Bf16Policy() {
  return MixedPrecision{
      .param_dtype = DType::kBF16, .reduce_dtype = DType::kBF16, .buffer_dtype = DType::kBF16};
}

std::optional<DType> ParseTorchDType(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (lower.rfind("torch.", 0) == 0) lower = lower.substr(6);
  if (lower == "float32" || lower == "fp32" || lower == "float") return DType::kF32;
  if (lower == "bfloat16" || lower == "bf16") return DType::kBF16;
  if (lower == "float16" || lower == "fp16" || lower == "half") return DType::kF16;
  return std::nullopt;
}

const char* TorchDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
    default:
      return "float32";
  }
}

std::string DescribePrecision(const MixedPrecision& mp, DType state) {
  if (!mp.enabled() && state == DType::kF32) return "fp32";
  auto name = [](DType d) { return d == DType::kBF16 ? "bf16" : "fp32"; };
  const std::string kept =
      state == DType::kF32
          ? "fp32 master weights and AdamW"
          : std::string(name(state)) + " weights, gradients and AdamW state (torch_dtype)";
  return std::string(name(mp.param_dtype)) + " mixed precision (" + name(mp.param_dtype) +
         " parameters, " + name(mp.reduce_dtype) + " reductions, " + name(mp.buffer_dtype) +
         " buffers; " + kept + ")";
}

std::string TorchDTypeNames() { return "float32 (fp32), bfloat16 (bf16)"; }

}  // namespace air::engine::fsdp
