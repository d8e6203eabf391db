// CpuBackend: the memory half of the CPU backends — buffers are 64-byte-aligned host
// allocations, copies are memcpy, and every call completes before it returns, which meets the
// asynchronous contract of backend.h trivially: frees are immediate (nothing queued can still
// use the memory), events are done when recorded, HostBuffers are plain host memory and
// Synchronize has nothing to wait for. ReferenceOps and FastOps derive from it and add the
// compute ops.
// Thread safety: stateless memory calls; see ops.h for the compute calls.
#pragma once

#include "engine/backend/backend.h"

namespace air::engine {

class CpuBackend : public Backend {
 public:
  Device device() const override { return Device{DeviceType::kCpu, 0}; }
  std::string Describe() const override;
  // The host's MemAvailable and MemTotal (host_memory.h).
  Result<DeviceMemory> QueryMemory() const override;
  Result<std::unique_ptr<Buffer>> Allocate(size_t bytes) const override;
  void Free(void* base, size_t bytes) const override;
  Result<std::unique_ptr<HostBuffer>> AllocateHost(size_t bytes) const override;
  void FreeHost(void* data, size_t bytes) const override;
  void CopyToDevice(const View& dst, const void* src) const override;
  void CopyToHost(void* dst, const View& src) const override;
  void CopyToDeviceAsync(const View& dst, const HostBuffer& src, size_t src_offset) const override;
  void CopyToHostAsync(const HostBuffer& dst, size_t dst_offset, const View& src) const override;
  void Copy(const View& dst, const View& src) const override;
  void Fill(const View& dst, float value) const override;
  void Zero(const View& dst) const override;
  std::unique_ptr<Event> RecordEvent() const override;
  void WaitEvent(const Event&) const override {}
  void Synchronize() const override {}
};

}  // namespace air::engine
