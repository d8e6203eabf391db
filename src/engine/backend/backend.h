// Backend: where tensors live and how they are computed (ggml's backend idea: the backend owns
// memory, not just compute). A backend allocates Buffers on its device, copies between host
// and device, fills and zeroes views, orders work with events, and runs the compute ops
// (engine/ops/ops.h) over its own memory. The model receives its backend from outside
// (model/llama_model.h) and only ever calls it: it never dereferences a view, so the CPU
// backends (backend/cpu/) and the CUDA one (backend/cuda/) are interchangeable under it. Scalar
// results (loss sums, squared norms) are written by ops into device scalars and read back with
// one CopyToHost when the caller needs them. Implementations are folders beside this file,
// created by name and device through one registry (backend/registry.h).
//
// The contract is that of an asynchronous device (a CUDA stream); the CPU backends meet it by
// finishing every call before it returns, so code written to it is correct on both:
//   - Order: calls on one backend take effect in call order (a GPU backend queues them on its
//     stream). Work on two backends (a compute and a communication stream of one GPU) is
//     ordered only through events: RecordEvent on one, WaitEvent on the other.
//   - Frees are stream-ordered: destroying a Buffer (Free) returns its memory once the work
//     queued before the free has finished, and only work queued after it can receive that
//     memory again. So a caller may drop a buffer right after queueing the last op that reads
//     it (FSDP's released unit storage, a Workspace that grows) without a Synchronize.
//   - Sources and destinations of copies: CopyToDevice's `src` may be reused as soon as it
//     returns (a GPU backend stages pageable memory before returning). CopyToHost waits for the
//     work before it and returns with `dst` filled: it is a sync, the one a caller pays to read
//     a loss. The Async copies go through pinned HostBuffers: the HostBuffer must not be written
//     (CopyToDeviceAsync) or read (CopyToHostAsync) until an Event recorded after the copy is
//     done.
//   - Memory: QueryMemory says what the device has free and in total (a GPU's own memory; the
//     host's MemAvailable for the CPU), for the plan's fit check. allocation_stats() counts the
//     bytes of this backend's Buffers in use and their peak (torch.cuda.memory_allocated and
//     max_memory_allocated): every implementation reports its Allocate and Free through
//     NoteAllocated / NoteFreed.
//   - A view of one device's memory passed to a backend of another device is a named abort
//     (op_checks.h), never a dereference of a foreign pointer.
//
// Thread safety: calls on one backend must not overlap (ops.h); give each thread that drives
// a model its own backend. Events may be waited for from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "engine/ops/ops.h"
#include "engine/view.h"

namespace air::engine {

// A point in one backend's queue of work (a CUDA event recorded on its stream).
class Event {
 public:
  virtual ~Event() = default;
  // Blocks the calling thread until every call queued before the event has finished.
  virtual void Synchronize() const = 0;
  // Whether that work has finished; never blocks.
  virtual bool Done() const = 0;
};

// Host memory a backend copies to and from without staging (page-locked for a GPU, so the
// copies run asynchronously). Returned to its backend when destroyed.
class HostBuffer {
 public:
  HostBuffer(const Backend* owner, void* data, size_t bytes)
      : owner_(owner), data_(data), bytes_(bytes) {}
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  const Backend* owner_;
  void* data_;
  size_t bytes_;
};

// A device's memory, for the plan's fit check and its memory line.
struct DeviceMemory {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// The bytes of one backend's Buffers: in use now, and the most in use at once since it was
// created or ResetPeakAllocation.
struct AllocationStats {
  uint64_t in_use_bytes = 0;
  uint64_t peak_bytes = 0;
};

class Backend : public Ops {
 public:
  // "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)", or the CPU's model and kernel level.
  virtual std::string Describe() const = 0;
  // Free and total memory of the device; Unavailable where it cannot be read.
  virtual Result<DeviceMemory> QueryMemory() const = 0;

  // ---- memory ----------------------------------------------------------------------------
  // A buffer of `bytes` bytes on this backend's device (contents unspecified). ResourceExhausted
  // naming the bytes asked and free when the device cannot hold it.
  virtual Result<std::unique_ptr<Buffer>> Allocate(size_t bytes) const = 0;
  // Returns a buffer's memory, stream-ordered (called by ~Buffer only).
  virtual void Free(void* base, size_t bytes) const = 0;
  // Host memory for the Async copies (page-locked on a GPU).
  virtual Result<std::unique_ptr<HostBuffer>> AllocateHost(size_t bytes) const = 0;
  // Returns a HostBuffer's memory (called by ~HostBuffer only; waits for no work: the caller
  // has waited for the copies that use it).
  virtual void FreeHost(void* data, size_t bytes) const = 0;

  // ---- copies and fills --------------------------------------------------------------------
  // dst (device) <- src (host, dst.bytes() bytes). `src` may be reused when this returns.
  virtual void CopyToDevice(const View& dst, const void* src) const = 0;
  // dst (host, src.bytes() bytes) <- src (device); waits for the work queued before it.
  virtual void CopyToHost(void* dst, const View& src) const = 0;
  // dst <- src.data() + src_offset (dst.bytes() bytes), queued: `src` must not change until an
  // event recorded after this call is done.
  virtual void CopyToDeviceAsync(const View& dst, const HostBuffer& src,
                                 size_t src_offset) const = 0;
  // dst.data() + dst_offset <- src (src.bytes() bytes), queued: `dst` holds the values once an
  // event recorded after this call is done.
  virtual void CopyToHostAsync(const HostBuffer& dst, size_t dst_offset, const View& src) const = 0;
  // dst <- src, both on this device, same dtype and element count.
  virtual void Copy(const View& dst, const View& src) const = 0;
  // Every element of a float view (F32 or BF16) = value (rounded for BF16).
  virtual void Fill(const View& dst, float value) const = 0;
  // Every byte of the view = 0 (any dtype: 0.0, 0).
  virtual void Zero(const View& dst) const = 0;

  // ---- ordering ----------------------------------------------------------------------------
  // An event after every call queued so far.
  virtual std::unique_ptr<Event> RecordEvent() const = 0;
  // Calls queued on this backend from now on start after `event` (recorded on this or another
  // backend of the same device) is done; the host does not wait.
  virtual void WaitEvent(const Event& event) const = 0;
  // Waits until every queued call has finished.
  virtual void Synchronize() const = 0;

  // ---- what the buffers hold ---------------------------------------------------------------
  AllocationStats allocation_stats() const;
  // Starts a new peak from the bytes in use now.
  void ResetPeakAllocation() const;

  // ---- helpers over the virtual calls ----------------------------------------------------
  // A buffer holding exactly one view of `dtype` and `shape`; the view is returned through
  // `view`.
  Result<std::unique_ptr<Buffer>> AllocateView(DType dtype, const Shape& shape, View* view) const;
  // Reads one F64 device scalar (one copy: the only sync a caller of a loss or norm pays).
  double ReadScalar(const View& scalar) const;
  // A host copy of a float view (F32, BF16, F16) as an fp32 Tensor of the view's shape.
  Tensor ToHostTensor(const View& src) const;
  // dst (a float view) <- dst.numel() fp32 host values, rounded to dst's dtype.
  void FromHostTensor(const View& dst, const float* values) const;

 protected:
  // Called by each implementation's Allocate (after it succeeded) and Free.
  void NoteAllocated(size_t bytes) const;
  void NoteFreed(size_t bytes) const;

 private:
  // Atomic: a communication thread may free buffers while the compute thread allocates.
  mutable std::atomic<uint64_t> in_use_bytes_{0};
  mutable std::atomic<uint64_t> peak_bytes_{0};
};

}  // namespace air::engine
