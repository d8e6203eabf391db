// Element types: of device memory (engine/view.h: F32, BF16, F16, I32, F64 for the scalar
// accumulators ops write, e.g. a loss sum, and U8 for packed bytes: MXFP4 blocks and scales) and of
// tensors stored in files (safetensors: F32, BF16, F16), with the conversions between the float
// types and the fp32 the engine computes in.
//
// Kernels compute in fp32 (the bf16 GEMM accumulates in fp32); BF16 is also a compute and
// communication dtype (mixed precision), F16 a storage and communication one. Conversions round
// to nearest even, keep NaN a NaN and infinities infinite, like torch's `.to(dtype)`.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace air::engine {

enum class DType { kF32, kBF16, kF16, kI32, kF64, kU8 };

// "F32", "BF16", "F16", "I32", "F64", "U8": the safetensors spelling.
const char* DTypeName(DType dtype);
// Parses the spelling of a float type air reads from checkpoints (F32, BF16, F16); nullopt for
// anything else (I32, F64, I64, ... are not weight types air loads).
std::optional<DType> ParseDType(std::string_view name);
// Bytes per element: 8, 4, 2 or 1.
size_t DTypeSize(DType dtype);
// The safetensors dtype names air reads, for error messages: "F32, BF16, F16".
std::string SupportedDTypeNames();

float Bf16ToF32(uint16_t bits);
uint16_t F32ToBf16(float value);  // round to nearest even
float F16ToF32(uint16_t bits);
uint16_t F32ToF16(float value);  // round to nearest even, overflow to infinity

// Bulk conversions between little-endian stored bytes and fp32 values, for the float types
// F32, BF16, F16 (others abort: callers check). `src` holds n elements of `dtype`; `dst`
// receives n floats.
void DecodeToF32(DType dtype, const void* src, size_t n, float* dst);
// `src` holds n floats; `dst` receives n elements of `dtype` (n * DTypeSize bytes).
void EncodeFromF32(DType dtype, const float* src, size_t n, void* dst);

}  // namespace air::engine
