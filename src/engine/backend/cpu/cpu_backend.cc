// Host memory for the CPU backends (see cpu_backend.h).
#include "engine/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "engine/backend/cpu/host_memory.h"
#include "engine/check.h"
#include "engine/dtype.h"

namespace air::engine {

namespace {

constexpr size_t kAlignment = 64;  // a cache line; AVX-512 vectors never straddle two

void* AlignedAllocate(size_t bytes) {
  const size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  return std::aligned_alloc(kAlignment, rounded);
}

Status HostExhausted(size_t bytes) {
  return ResourceExhausted("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
}

// Everything before it has finished when it is recorded: CPU calls complete before returning.
class DoneEvent : public Event {
 public:
  void Synchronize() const override {}
  bool Done() const override { return true; }
};

}  // namespace

std::string CpuBackend::Describe() const { return "cpu"; }

Result<DeviceMemory> CpuBackend::QueryMemory() const {
  const std::optional<DeviceMemory> memory = HostMemory(DefaultEnv());
  if (!memory) return Unavailable("cannot read MemAvailable and MemTotal from /proc/meminfo");
  return *memory;
}

Result<std::unique_ptr<Buffer>> CpuBackend::Allocate(size_t bytes) const {
  void* base = AlignedAllocate(bytes);
  if (base == nullptr) return HostExhausted(bytes);
  NoteAllocated(bytes);
  return std::make_unique<Buffer>(this, device(), base, bytes);
}

void CpuBackend::Free(void* base, size_t bytes) const {
  std::free(base);
  NoteFreed(bytes);
}

Result<std::unique_ptr<HostBuffer>> CpuBackend::AllocateHost(size_t bytes) const {
  void* data = AlignedAllocate(bytes);
  if (data == nullptr) return HostExhausted(bytes);
  return std::make_unique<HostBuffer>(this, data, bytes);
}

void CpuBackend::FreeHost(void* data, size_t) const { std::free(data); }

std::unique_ptr<Event> CpuBackend::RecordEvent() const { return std::make_unique<DoneEvent>(); }

void CpuBackend::CopyToDevice(const View& dst, const void* src) const {
  if (dst.bytes() > 0) std::memcpy(dst.raw(), src, dst.bytes());
}

void CpuBackend::CopyToHost(void* dst, const View& src) const {
  if (src.bytes() > 0) std::memcpy(dst, src.raw(), src.bytes());
}

void CpuBackend::CopyToDeviceAsync(const View& dst, const HostBuffer& src,
                                   size_t src_offset) const {
  AIR_ENGINE_CHECK(src_offset + dst.bytes() <= src.bytes(), "copy past the end of a HostBuffer");
  CopyToDevice(dst, static_cast<const char*>(src.data()) + src_offset);
}

void CpuBackend::CopyToHostAsync(const HostBuffer& dst, size_t dst_offset, const View& src) const {
  AIR_ENGINE_CHECK(dst_offset + src.bytes() <= dst.bytes(), "copy past the end of a HostBuffer");
  CopyToHost(static_cast<char*>(dst.data()) + dst_offset, src);
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
