// CpuBackend: the memory half of the CPU backends — buffers are 64-byte-aligned host
// allocations, copies are memcpy, and every call completes before it returns (Synchronize has
// nothing to wait for). ReferenceOps and FastOps derive from it and add the compute ops.
// Thread safety: stateless memory calls; see ops.h for the compute calls.
#pragma once

#include "engine/backend/backend.h"

namespace air::engine {

class CpuBackend : public Backend {
 public:
  Device device() const override { return Device{DeviceType::kCpu, 0}; }
  Result<std::unique_ptr<Buffer>> Allocate(size_t bytes) const override;
  void Free(void* base, size_t bytes) const override;
  void CopyToDevice(const View& dst, const void* src) const override;
  void CopyToHost(void* dst, const View& src) const override;
  void Copy(const View& dst, const View& src) const override;
  void Fill(const View& dst, float value) const override;
  void Zero(const View& dst) const override;
  void Synchronize() const override {}
};

}  // namespace air::engine
