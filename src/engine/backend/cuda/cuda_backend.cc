// CudaBackend's memory, ordering and device (see cuda_backend.h), and the factory the registry
// calls (cuda_factory.h). The ops' kernel hooks are cuda_backend_ops.cc.
#include "engine/backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_factory.h"
#include "engine/check.h"

namespace air::engine::cuda {

namespace {

// The GPU each host thread last made current (cudaSetDevice is thread-local state).
thread_local int current_device = -1;

std::string VisibleDevicesNote() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible == nullptr ? std::string("CUDA_VISIBLE_DEVICES is not set")
                            : fmt::format("CUDA_VISIBLE_DEVICES={}", visible);
}

// What cudaGetDeviceCount says once per process: the count, or why there is none.
struct Probe {
  int count = 0;
  Status status;
};

const Probe& ProbeDevices() {
  static const Probe probe = [] {
    Probe p;
    const cudaError_t error = cudaGetDeviceCount(&p.count);
    if (error != cudaSuccess) {
      p.count = 0;
      const char* hint =
          error == cudaErrorInsufficientDriver
              ? "the NVIDIA driver is missing or older than this build's CUDA 13 runtime needs"
          : error == cudaErrorNoDevice ? "no NVIDIA GPU is present or visible"
                                       : "the NVIDIA driver could not open a GPU";
      p.status = FailedPrecondition(fmt::format(
          "no usable CUDA device: cudaGetDeviceCount failed: {} ({}): {}; {}. Use the CPU instead "
          "with device: cpu",
          cudaGetErrorString(error), cudaGetErrorName(error), hint, VisibleDevicesNote()));
      cudaGetLastError();  // not sticky: clear it
    } else if (p.count == 0) {
      p.status = FailedPrecondition(
          fmt::format("no CUDA device is visible to this process ({}). Use the CPU instead with "
                      "device: cpu",
                      VisibleDevicesNote()));
    }
    return p;
  }();
  return probe;
}

// Makes GPU `index` current on the calling thread (once per thread and GPU).
void MakeCurrent(int index) {
  if (current_device == index) return;
  AIR_CUDA_CHECK(cudaSetDevice(index));
  current_device = index;
}

// An event of GPU `index`'s stream. Other threads wait on it too (the NCCL watchdog, the
// collectives' waiters): each call makes its GPU current first, for a thread that never chose one
// would otherwise open a context on GPU 0 (hundreds of MiB there, from every rank of the node).
class CudaEvent : public Event {
 public:
  CudaEvent(int index, cudaStream_t stream) : index_(index) {
    MakeCurrent(index_);
    AIR_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    AIR_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~CudaEvent() override {
    MakeCurrent(index_);
    cudaEventDestroy(event_);
  }
  void Synchronize() const override {
    MakeCurrent(index_);
    AIR_CUDA_CHECK(cudaEventSynchronize(event_));
  }
  bool Done() const override {
    MakeCurrent(index_);
    const cudaError_t state = cudaEventQuery(event_);
    if (state == cudaErrorNotReady) return false;
    AIR_CUDA_CHECK(state);
    return true;
  }
  cudaEvent_t get() const { return event_; }

 private:
  int index_;
  cudaEvent_t event_ = nullptr;
};

}  // namespace

// Two page-locked slots CopyToDevice stages host memory through: the source is copied into a
// slot on the host (then free to reuse), the slot's DMA is queued on the stream, and an event
// marks when the slot may be written again. Two slots let the host fill one while the other's
// DMA runs; a large copy goes through them in turns.
class PinnedStaging {
 public:
  static constexpr size_t kSlotBytes = size_t{16} << 20;

  PinnedStaging() {
    for (Slot& slot : slots_) {
      AIR_CUDA_CHECK(cudaHostAlloc(&slot.data, kSlotBytes, cudaHostAllocDefault));
      AIR_CUDA_CHECK(cudaEventCreateWithFlags(&slot.free, cudaEventDisableTiming));
    }
  }
  ~PinnedStaging() {
    for (Slot& slot : slots_) {
      cudaEventSynchronize(slot.free);
      cudaEventDestroy(slot.free);
      cudaFreeHost(slot.data);
    }
  }
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  void Upload(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
    for (size_t done = 0; done < bytes;) {
      Slot& slot = slots_[next_];
      next_ = (next_ + 1) % 2;
      const size_t piece = std::min(kSlotBytes, bytes - done);
      AIR_CUDA_CHECK(cudaEventSynchronize(slot.free));  // its last DMA has read it
      std::memcpy(slot.data, static_cast<const char*>(src) + done, piece);
      AIR_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + done, slot.data, piece,
                                     cudaMemcpyHostToDevice, stream));
      AIR_CUDA_CHECK(cudaEventRecord(slot.free, stream));
      done += piece;
    }
  }

 private:
  struct Slot {
    void* data = nullptr;
    cudaEvent_t free = nullptr;
  };
  Slot slots_[2];
  int next_ = 0;
};

namespace {

Status OutOfMemory(size_t bytes, int index) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  return ResourceExhausted(fmt::format(
      "CUDA out of memory on cuda:{}: tried to allocate {:.2f} GiB; {:.2f} GiB free of {:.2f} "
      "GiB. Use activation checkpointing, a smaller per_device_batch_size or max_seq_len, or "
      "more ranks to shard over",
      index, bytes / 1073741824.0, free_bytes / 1073741824.0, total_bytes / 1073741824.0));
}

}  // namespace

Result<int> CudaDeviceCount() {
  const Probe& probe = ProbeDevices();
  if (!probe.status.ok()) return probe.status;
  return probe.count;
}

Result<std::shared_ptr<Backend>> CreateCudaBackend(int index) {
  AIR_ASSIGN_OR_RETURN(std::shared_ptr<CudaBackend> backend, CudaBackend::Create(index));
  return std::shared_ptr<Backend>(std::move(backend));
}

Result<std::shared_ptr<CudaBackend>> CudaBackend::Create(int index) {
  AIR_ASSIGN_OR_RETURN(const int count, CudaDeviceCount());
  if (index < 0 || index >= count) {
    return InvalidArgument(fmt::format("cuda:{} does not exist: {} CUDA device{} visible ({})",
                                       index, count, count == 1 ? " is" : "s are",
                                       VisibleDevicesNote()));
  }
  AIR_CUDA_CHECK(cudaSetDevice(index));
  current_device = index;
  cudaDeviceProp props{};
  AIR_CUDA_CHECK(cudaGetDeviceProperties(&props, index));
  // The stream-ordered pool keeps freed memory for reuse instead of returning it to the driver
  // at every synchronization: a training step's allocations after the first come from it.
  cudaMemPool_t pool = nullptr;
  AIR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index));
  uint64_t keep_everything = UINT64_MAX;
  AIR_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
  cudaStream_t stream = nullptr;
  AIR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Result<std::unique_ptr<GemmRunner>> gemm = GemmRunner::Create(stream);
  if (!gemm.ok()) {
    cudaStreamDestroy(stream);
    return gemm.status();
  }
  const std::string description =
      fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", props.name, props.major, props.minor,
                  props.multiProcessorCount, props.totalGlobalMem / 1073741824.0);
  return std::shared_ptr<CudaBackend>(
      new CudaBackend(index, stream, description, std::move(gemm).value()));
}

CudaBackend::CudaBackend(int index, cudaStream_t stream, std::string description,
                         std::unique_ptr<GemmRunner> gemm)
    : index_(index),
      stream_(stream),
      description_(std::move(description)),
      gemm_(std::move(gemm)) {}

CudaBackend::~CudaBackend() {
  Activate();
  cudaStreamSynchronize(stream_);
  staging_.reset();
  gemm_.reset();
  cudaStreamDestroy(stream_);
}

void CudaBackend::Activate() const { MakeCurrent(index_); }

bool CudaBackend::Supports(OpKind, DType dtype) const {
  return dtype == DType::kF32 || dtype == DType::kBF16;
}

Result<DeviceMemory> CudaBackend::QueryMemory() const {
  Activate();
  size_t free_bytes = 0, total_bytes = 0;
  const cudaError_t error = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (error != cudaSuccess) {
    return Unavailable(
        fmt::format("cudaMemGetInfo on cuda:{}: {}", index_, cudaGetErrorString(error)));
  }
  // Memory this process's pool holds but no buffer uses is free to this process too.
  cudaMemPool_t pool = nullptr;
  uint64_t reserved = 0, used = 0;
  AIR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index_));
  AIR_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  AIR_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  return DeviceMemory{.free_bytes = free_bytes + (reserved > used ? reserved - used : 0),
                      .total_bytes = total_bytes};
}

Result<std::unique_ptr<Buffer>> CudaBackend::Allocate(size_t bytes) const {
  Activate();
  void* base = nullptr;
  cudaError_t error = cudaMallocAsync(&base, bytes == 0 ? 1 : bytes, stream_);
  if (error == cudaErrorMemoryAllocation) {
    // The pool may hold freed memory in pieces too small: return it to the driver and retry.
    cudaGetLastError();
    AIR_CUDA_CHECK(cudaStreamSynchronize(stream_));
    cudaMemPool_t pool = nullptr;
    AIR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index_));
    AIR_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
    error = cudaMallocAsync(&base, bytes == 0 ? 1 : bytes, stream_);
  }
  if (error == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return OutOfMemory(bytes, index_);
  }
  AIR_CUDA_CHECK(error);
  NoteAllocated(bytes);
  return std::make_unique<Buffer>(this, device(), base, bytes);
}

void CudaBackend::Free(void* base, size_t bytes) const {
  Activate();
  AIR_CUDA_CHECK(cudaFreeAsync(base, stream_));
  NoteFreed(bytes);
}

Result<std::unique_ptr<HostBuffer>> CudaBackend::AllocateHost(size_t bytes) const {
  Activate();
  void* data = nullptr;
  const cudaError_t error = cudaHostAlloc(&data, bytes == 0 ? 1 : bytes, cudaHostAllocDefault);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhausted(fmt::format("cannot allocate {} bytes of page-locked host memory: {}",
                                         bytes, cudaGetErrorString(error)));
  }
  return std::make_unique<HostBuffer>(this, data, bytes);
}

void CudaBackend::FreeHost(void* data, size_t) const {
  Activate();  // a HostBuffer may die on another thread (the staged group's communication one)
  AIR_CUDA_CHECK(cudaFreeHost(data));
}

void CudaBackend::CopyToDevice(const View& dst, const void* src) const {
  if (dst.bytes() == 0) return;
  Activate();
  // Through the staging slots: `src` is copied out before this returns (backend.h's promise,
  // which CUDA does not make for pageable memory), and nothing waits for the stream.
  if (staging_ == nullptr) staging_ = std::make_unique<PinnedStaging>();
  staging_->Upload(dst.raw(), src, dst.bytes(), stream_);
}

void CudaBackend::CopyToHost(void* dst, const View& src) const {
  if (src.bytes() == 0) return;
  Activate();
  AIR_CUDA_CHECK(cudaMemcpyAsync(dst, src.raw(), src.bytes(), cudaMemcpyDeviceToHost, stream_));
  AIR_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::CopyToDeviceAsync(const View& dst, const HostBuffer& src,
                                    size_t src_offset) const {
  AIR_ENGINE_CHECK(src_offset + dst.bytes() <= src.bytes(), "copy past the end of a HostBuffer");
  if (dst.bytes() == 0) return;
  Activate();
  AIR_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), static_cast<const char*>(src.data()) + src_offset,
                                 dst.bytes(), cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::CopyToHostAsync(const HostBuffer& dst, size_t dst_offset, const View& src) const {
  AIR_ENGINE_CHECK(dst_offset + src.bytes() <= dst.bytes(), "copy past the end of a HostBuffer");
  if (src.bytes() == 0) return;
  Activate();
  AIR_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst.data()) + dst_offset, src.raw(),
                                 src.bytes(), cudaMemcpyDeviceToHost, stream_));
}

void CudaBackend::Copy(const View& dst, const View& src) const {
  AIR_ENGINE_CHECK(dst.dtype() == src.dtype() && dst.numel() == src.numel(),
                   "Copy between views of different dtype or size");
  if (dst.bytes() == 0 || dst.raw() == src.raw()) return;
  AIR_ENGINE_CHECK(dst.device() == device() && src.device() == device(),
                   "Copy of a view of another device's memory");
  Activate();
  const char* s = static_cast<const char*>(src.raw());
  char* d = static_cast<char*>(dst.raw());
  const size_t bytes = dst.bytes();
  if (d + bytes <= s || s + bytes <= d) {
    AIR_CUDA_CHECK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, stream_));
    return;
  }
  // Overlapping ranges (memmove's case) go through scratch.
  void* staging = nullptr;
  AIR_CUDA_CHECK(cudaMallocAsync(&staging, bytes, stream_));
  AIR_CUDA_CHECK(cudaMemcpyAsync(staging, s, bytes, cudaMemcpyDeviceToDevice, stream_));
  AIR_CUDA_CHECK(cudaMemcpyAsync(d, staging, bytes, cudaMemcpyDeviceToDevice, stream_));
  AIR_CUDA_CHECK(cudaFreeAsync(staging, stream_));
}

void CudaBackend::Fill(const View& dst, float value) const {
  AIR_ENGINE_CHECK(dst.dtype() == DType::kF32 || dst.dtype() == DType::kBF16,
                   "Fill of a view that is not F32 or BF16");
  AIR_ENGINE_CHECK(dst.empty() || dst.device() == device(), "Fill of another device's view");
  Activate();
  cuda::Fill(Out{dst.raw(), dst.dtype()}, dst.numel(), value, stream_);
}

void CudaBackend::Zero(const View& dst) const {
  if (dst.bytes() == 0) return;
  AIR_ENGINE_CHECK(dst.device() == device(), "Zero of another device's view");
  Activate();
  AIR_CUDA_CHECK(cudaMemsetAsync(dst.raw(), 0, dst.bytes(), stream_));
}

std::unique_ptr<Event> CudaBackend::RecordEvent() const {
  Activate();
  return std::make_unique<CudaEvent>(index_, stream_);
}

void CudaBackend::WaitEvent(const Event& event) const {
  // An event of a CPU backend is done when it exists; a CUDA one is waited for on the stream.
  const auto* cuda_event = dynamic_cast<const CudaEvent*>(&event);
  if (cuda_event == nullptr) return;
  Activate();
  AIR_CUDA_CHECK(cudaStreamWaitEvent(stream_, cuda_event->get(), 0));
}

void CudaBackend::Synchronize() const {
  Activate();
  AIR_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace air::engine::cuda
