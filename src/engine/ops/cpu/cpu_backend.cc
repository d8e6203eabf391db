// Host memory for the CPU backends (see cpu_backend.h).
#include "engine/ops/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "engine/check.h"
#include "engine/dtype.h"

namespace air::engine {

namespace {
constexpr size_t kAlignment = 64;  // a cache line; AVX-512 vectors never straddle two
}  // namespace

Result<std::unique_ptr<Buffer>> CpuBackend::Allocate(size_t bytes) const {
  const size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  void* base = std::aligned_alloc(kAlignment, rounded);
  if (base == nullptr) {
    return ResourceExhausted("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  }
  return std::make_unique<Buffer>(this, device(), base, bytes);
}

void CpuBackend::Free(void* base, size_t) const { std::free(base); }

void CpuBackend::CopyToDevice(const View& dst, const void* src) const {
  if (dst.bytes() > 0) std::memcpy(dst.raw(), src, dst.bytes());
}

void CpuBackend::CopyToHost(void* dst, const View& src) const {
  if (src.bytes() > 0) std::memcpy(dst, src.raw(), src.bytes());
}

void CpuBackend::Copy(const View& dst, const View& src) const {
  AIR_ENGINE_CHECK(dst.dtype() == src.dtype() && dst.numel() == src.numel(),
                   "Copy between views of different dtype or size");
  if (dst.bytes() > 0 && dst.raw() != src.raw()) std::memmove(dst.raw(), src.raw(), dst.bytes());
}

void CpuBackend::Fill(const View& dst, float value) const {
  if (dst.dtype() == DType::kBF16) {
    uint16_t* p = dst.bf16();
    std::fill(p, p + dst.numel(), F32ToBf16(value));
    return;
  }
  float* p = dst.f32();
  std::fill(p, p + dst.numel(), value);
}

void CpuBackend::Zero(const View& dst) const {
  if (dst.bytes() > 0) std::memset(dst.raw(), 0, dst.bytes());
}

}  // namespace air::engine
