// Buffer and View: device memory owned by a Backend (engine/backend/backend.h), and typed,
// shaped windows into it.
//
// A Buffer is one allocation on one device (host memory for the CPU backends, device memory for
// a GPU backend): it is created by Backend::Allocate and returns its bytes to that backend when
// destroyed. A View names a contiguous, row-major range of a buffer with a dtype and a shape:
// a parameter inside its unit's flat buffer (model/param_group.h), an activation inside a
// workspace (engine/workspace.h), a scalar accumulator. Views do not own memory and are cheap
// values; a view is valid while its buffer lives. Data pointers of a view are device addresses:
// only the backend that owns the buffer (its ops and copies) may dereference them, so model
// code never touches the numbers directly and a GPU backend changes nothing above it.
//
// Thread safety: a Buffer is owned by one object; Views are plain values (the memory they name
// is written by backend calls, which are not concurrent: ops.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/dtype.h"
#include "engine/tensor.h"

namespace air::engine {

class Backend;

enum class DeviceType { kCpu, kCuda };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string ToString() const;  // "cpu", "cuda:1"
};

class Buffer {
 public:
  Buffer(const Backend* owner, Device device, void* base, size_t bytes)
      : owner_(owner), device_(device), base_(base), bytes_(bytes) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Device device() const { return device_; }
  size_t bytes() const { return bytes_; }
  // The device address of byte 0 (dereferenceable by the owning backend only).
  void* base() const { return base_; }
  const Backend* owner() const { return owner_; }

 private:
  const Backend* owner_;
  Device device_;
  void* base_;
  size_t bytes_;
};

class View {
 public:
  View() = default;
  // `bytes_offset` + the shape's bytes must fit in the buffer (checked).
  View(const Buffer* buffer, size_t byte_offset, DType dtype, Shape shape);

  bool empty() const { return buffer_ == nullptr || numel_ == 0; }
  const Buffer* buffer() const { return buffer_; }
  size_t byte_offset() const { return byte_offset_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return static_cast<size_t>(numel_) * DTypeSize(dtype_); }
  // Dimension i; negative i counts from the end.
  int64_t dim(int i) const;
  Device device() const;

  // Rows [first, first + count) along dimension 0 (a view of the same buffer).
  View Rows(int64_t first, int64_t count) const;
  // Elements [first, first + count) of the view read as a flat array, shaped (count).
  View Slice(int64_t first, int64_t count) const;
  // The same elements, shaped (numel).
  View Flat() const { return Reshaped({numel_}); }
  // The same elements under another shape of the same element count.
  View Reshaped(Shape shape) const;

  // Typed device addresses; each checks the dtype (a bf16 view is never read as fp32).
  // Null for an empty view.
  float* f32() const;
  uint16_t* bf16() const;  // the raw bits of each bf16 element
  int32_t* i32() const;
  double* f64() const;
  void* raw() const;

 private:
  const Buffer* buffer_ = nullptr;
  size_t byte_offset_ = 0;
  DType dtype_ = DType::kF32;
  Shape shape_;
  int64_t numel_ = 0;
};

}  // namespace air::engine
