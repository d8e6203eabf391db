// Element types of tensors as they are stored in files (safetensors), and the conversions
// between them and the fp32 the engine computes in.
//
// The engine's Tensor is always fp32; BF16 and F16 exist only at the edges (reading and writing
// checkpoints, and later as compute types of fast paths). Conversions round to nearest even,
// keep NaN a NaN and infinities infinite, like torch's `.to(dtype)`.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace air::engine {

enum class DType { kF32, kBF16, kF16 };

// "F32", "BF16", "F16": the safetensors spelling.
const char* DTypeName(DType dtype);
// Parses the safetensors spelling; nullopt for anything else (F64, I64, ... are not supported).
std::optional<DType> ParseDType(std::string_view name);
// Bytes per element: 4 or 2.
size_t DTypeSize(DType dtype);
// The safetensors dtype names air reads, for error messages: "F32, BF16, F16".
std::string SupportedDTypeNames();

float Bf16ToF32(uint16_t bits);
uint16_t F32ToBf16(float value);  // round to nearest even
float F16ToF32(uint16_t bits);
uint16_t F32ToF16(float value);  // round to nearest even, overflow to infinity

// Bulk conversions between little-endian stored bytes and fp32 values.
// `src` holds n elements of `dtype`; `dst` receives n floats.
void DecodeToF32(DType dtype, const void* src, size_t n, float* dst);
// `src` holds n floats; `dst` receives n elements of `dtype` (n * DTypeSize bytes).
void EncodeFromF32(DType dtype, const float* src, size_t n, void* dst);

}  // namespace air::engine
