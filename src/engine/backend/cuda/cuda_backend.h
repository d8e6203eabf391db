// CudaBackend: the Backend (backend.h) of one NVIDIA GPU. Each backend object owns a CUDA
// stream: its calls are queued there in call order and the host waits only where the contract
// says (CopyToHost, Synchronize, an Event's Synchronize). Memory comes from the device's
// stream-ordered pool (cudaMallocAsync, kept cached: a training step's allocations after the
// first reuse it) and frees are queued on the stream, which is backend.h's stream-ordered free.
// HostBuffers are page-locked (cudaHostAlloc), so the Async copies overlap compute; plain host
// memory given to CopyToDevice is staged through page-locked slots of the backend's own, so the
// source is free when the call returns and the copy still does not wait for the stream. GEMMs are
// cuBLASLt's (cuda_gemm.h); every other op is a kernel of cuda_kernels.h, launched on the
// stream with the sizes the public op checked. Every op accepts F32 and BF16 arguments where its
// roles allow them, as the CPU backends do; nothing is ever run elsewhere.
//
// Thread safety: as every backend, calls must not overlap (ops.h). Two backends of one GPU (a
// compute and a communication stream) may be driven from two threads; they share the device's
// memory pool, which CUDA makes thread-safe.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_gemm.h"

namespace air::engine::cuda {

class PinnedStaging;  // cuda_backend.cc

class CudaBackend : public Backend {
 public:
  // A backend on GPU `index` of the visible ones (cuda_factory.h checks the index).
  static Result<std::shared_ptr<CudaBackend>> Create(int index);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device{DeviceType::kCuda, index_}; }
  // F32 and BF16 for every op (master state too: a bf16-state run).
  bool Supports(OpKind op, DType dtype) const override;
  std::string Describe() const override { return description_; }
  // cudaMemGetInfo's free and total, plus what this process's pool holds cached but unused.
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
  void WaitEvent(const Event& event) const override;
  void Synchronize() const override;

  cudaStream_t stream() const { return stream_; }

 protected:
  AIR_OPS_KERNELS(, override)

 private:
  CudaBackend(int index, cudaStream_t stream, std::string description,
              std::unique_ptr<GemmRunner> gemm);
  // Makes this backend's GPU the calling thread's current device.
  void Activate() const;

  const int index_;
  cudaStream_t stream_;
  std::string description_;
  // cuBLASLt's handle, workspace and plan cache: logically part of a call.
  mutable std::unique_ptr<GemmRunner> gemm_;
  // CopyToDevice's page-locked staging (cuda_backend.cc): created on first use.
  mutable std::unique_ptr<PinnedStaging> staging_;
};

}  // namespace air::engine::cuda
