// Backend: where tensors live and how they are computed (ggml's backend idea: the backend owns
// memory, not just compute). A backend allocates Buffers on its device, copies between host
// and device, fills and zeroes views, synchronizes, and runs the compute ops (engine/ops/ops.h)
// over its own memory. The model receives its backend from outside (model/llama_model.h) and
// only ever calls it: it never dereferences a view, so the CPU backends (ops/cpu/) and a future
// CUDA one are interchangeable under it. Scalar results (loss sums, squared norms) are written
// by ops into device scalars and read back with one CopyToHost when the caller needs them.
//
// Ordering: calls on a backend execute in call order (a GPU backend queues them on its stream;
// CopyToHost waits for what precedes it, Synchronize waits for everything). The CPU backends
// run each call to completion before returning.
//
// Thread safety: calls on one backend must not overlap (ops.h); give each thread that drives
// a model its own backend.
#pragma once

#include <cstddef>
#include <memory>

#include "base/status.h"
#include "engine/ops/ops.h"
#include "engine/view.h"

namespace air::engine {

class Backend : public Ops {
 public:
  virtual Device device() const = 0;

  // ---- memory ----------------------------------------------------------------------------
  // A buffer of `bytes` bytes on this backend's device (contents unspecified). ResourceExhausted
  // when the device cannot hold it.
  virtual Result<std::unique_ptr<Buffer>> Allocate(size_t bytes) const = 0;
  // Returns a buffer's memory (called by ~Buffer only).
  virtual void Free(void* base, size_t bytes) const = 0;
  // dst (device) <- src (host, dst.bytes() bytes).
  virtual void CopyToDevice(const View& dst, const void* src) const = 0;
  // dst (host, src.bytes() bytes) <- src (device); waits for preceding work on src.
  virtual void CopyToHost(void* dst, const View& src) const = 0;
  // dst <- src, both on this device, same dtype and element count.
  virtual void Copy(const View& dst, const View& src) const = 0;
  // Every element of a float view (F32 or BF16) = value (rounded for BF16).
  virtual void Fill(const View& dst, float value) const = 0;
  // Every byte of the view = 0 (any dtype: 0.0, 0).
  virtual void Zero(const View& dst) const = 0;
  // Waits until every queued call has finished.
  virtual void Synchronize() const = 0;

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
};

}  // namespace air::engine
