// Element type names, sizes and fp32 <-> bf16/f16 conversions (see dtype.h).
#include "engine/dtype.h"

#include <cmath>
#include <cstring>

#include "engine/check.h"
#include "engine/ops/op_semantics.h"

namespace air::engine {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kI32:
      return "I32";
    case DType::kF64:
      return "F64";
    case DType::kU8:
      return "U8";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  return std::nullopt;
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kU8:
      return 1;
  }
  return 0;
}

std::string SupportedDTypeNames() { return "F32, BF16, F16"; }

namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

float Bf16ToF32(uint16_t bits) { return WidenBf16(bits); }

uint16_t F32ToBf16(float value) { return RoundToBf16(value); }

float F16ToF32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) {  // infinity or NaN
    return BitsFloat(sign | 0x7f800000u | (mantissa << 13));
  }
  return BitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t F32ToF16(float value) {
  const uint32_t u = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): value / 2^-24 rounded to nearest even integer.
    const float scaled = BitsFloat(abs) * 16777216.0f;  // exact: a power-of-two scale
    const float rounded = std::nearbyint(scaled);       // default mode: nearest even
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(rounded));
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  const uint32_t rebased = abs - (112u << 23);
  const uint32_t rounding_bias = 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rebased + rounding_bias) >> 13));
}

void DecodeToF32(DType dtype, const void* src, size_t n, float* dst) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, bytes, n * 4);  // little-endian host (x86-64, aarch64)
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, bytes + 2 * i, 2);
        dst[i] = Bf16ToF32(b);
      }
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, bytes + 2 * i, 2);
        dst[i] = F16ToF32(b);
      }
      return;
    case DType::kI32:
    case DType::kF64:
    case DType::kU8:
      break;
  }
  AIR_ENGINE_CHECK(false, "DecodeToF32 of a non-float dtype");
}

void EncodeFromF32(DType dtype, const float* src, size_t n, void* dst) {
  auto* bytes = static_cast<uint8_t*>(dst);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(bytes, src, n * 4);
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t b = F32ToBf16(src[i]);
        std::memcpy(bytes + 2 * i, &b, 2);
      }
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t b = F32ToF16(src[i]);
        std::memcpy(bytes + 2 * i, &b, 2);
      }
      return;
    case DType::kI32:
    case DType::kF64:
    case DType::kU8:
      break;
  }
  AIR_ENGINE_CHECK(false, "EncodeFromF32 to a non-float dtype");
}

}  // namespace air::engine
