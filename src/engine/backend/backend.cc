// Backend helpers built on the virtual memory calls (see backend.h).
#include "engine/backend/backend.h"

#include <vector>

#include "engine/check.h"

namespace air::engine {

HostBuffer::~HostBuffer() {
  if (owner_ != nullptr && data_ != nullptr) owner_->FreeHost(data_, bytes_);
}

Result<std::unique_ptr<Buffer>> Backend::AllocateView(DType dtype, const Shape& shape,
                                                      View* view) const {
  AIR_ASSIGN_OR_RETURN(auto buffer,
                       Allocate(static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype)));
  *view = View(buffer.get(), 0, dtype, shape);
  return buffer;
}

AllocationStats Backend::allocation_stats() const {
  return {.in_use_bytes = in_use_bytes_.load(), .peak_bytes = peak_bytes_.load()};
}

void Backend::ResetPeakAllocation() const { peak_bytes_.store(in_use_bytes_.load()); }

void Backend::NoteAllocated(size_t bytes) const {
  const uint64_t now = in_use_bytes_.fetch_add(bytes) + bytes;
  uint64_t peak = peak_bytes_.load();
  while (now > peak && !peak_bytes_.compare_exchange_weak(peak, now)) {
  }
}

void Backend::NoteFreed(size_t bytes) const { in_use_bytes_.fetch_sub(bytes); }

double Backend::ReadScalar(const View& scalar) const {
  AIR_ENGINE_CHECK(scalar.dtype() == DType::kF64 && scalar.numel() == 1, "not an F64 scalar");
  double value = 0.0;
  CopyToHost(&value, scalar);
  return value;
}

Tensor Backend::ToHostTensor(const View& src) const {
  Tensor out(src.shape());
  if (src.empty()) return out;
  if (src.dtype() == DType::kF32) {
    CopyToHost(out.data(), src);
    return out;
  }
  AIR_ENGINE_CHECK(src.dtype() == DType::kBF16 || src.dtype() == DType::kF16,
                   "ToHostTensor of a view that is not a float dtype");
  std::vector<uint16_t> bits(static_cast<size_t>(src.numel()));
  CopyToHost(bits.data(), src);
  DecodeToF32(src.dtype(), bits.data(), bits.size(), out.data());
  return out;
}

void Backend::FromHostTensor(const View& dst, const float* values) const {
  if (dst.empty()) return;
  if (dst.dtype() == DType::kF32) {
    CopyToDevice(dst, values);
    return;
  }
  AIR_ENGINE_CHECK(dst.dtype() == DType::kBF16 || dst.dtype() == DType::kF16,
                   "FromHostTensor into a view that is not a float dtype");
  std::vector<uint16_t> bits(static_cast<size_t>(dst.numel()));
  EncodeFromF32(dst.dtype(), values, bits.size(), bits.data());
  CopyToDevice(dst, bits.data());
}

}  // namespace air::engine
