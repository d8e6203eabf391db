// Buffer and View (see view.h).
#include "engine/view.h"

#include "engine/backend/backend.h"
#include "engine/check.h"

namespace air::engine {

std::string Device::ToString() const {
  return type == DeviceType::kCpu ? "cpu" : "cuda:" + std::to_string(index);
}

Buffer::~Buffer() {
  if (owner_ != nullptr && base_ != nullptr) owner_->Free(base_, bytes_);
}

View::View(const Buffer* buffer, size_t byte_offset, DType dtype, Shape shape)
    : buffer_(buffer), byte_offset_(byte_offset), dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) AIR_ENGINE_CHECK(d >= 0, "negative dimension");
  numel_ = NumElements(shape_);
  AIR_ENGINE_CHECK(buffer_ == nullptr || byte_offset_ + bytes() <= buffer_->bytes(),
                   "view outside its buffer");
}

int64_t View::dim(int i) const {
  const int r = static_cast<int>(shape_.size());
  if (i < 0) i += r;
  AIR_ENGINE_CHECK(i >= 0 && i < r, "dimension index out of range");
  return shape_[static_cast<size_t>(i)];
}

Device View::device() const { return buffer_ != nullptr ? buffer_->device() : Device{}; }

View View::Rows(int64_t first, int64_t count) const {
  AIR_ENGINE_CHECK(!shape_.empty() && first >= 0 && count >= 0 && first + count <= shape_[0],
                   "row range outside the view");
  Shape shape = shape_;
  shape[0] = count;
  const size_t row_bytes = shape_[0] > 0 ? bytes() / static_cast<size_t>(shape_[0]) : 0;
  return View(buffer_, byte_offset_ + static_cast<size_t>(first) * row_bytes, dtype_,
              std::move(shape));
}

View View::Slice(int64_t first, int64_t count) const {
  AIR_ENGINE_CHECK(first >= 0 && count >= 0 && first + count <= numel_,
                   "element range outside the view");
  return View(buffer_, byte_offset_ + static_cast<size_t>(first) * DTypeSize(dtype_), dtype_,
              {count});
}

View View::Reshaped(Shape shape) const {
  AIR_ENGINE_CHECK(NumElements(shape) == numel_, "reshape must keep the element count");
  return View(buffer_, byte_offset_, dtype_, std::move(shape));
}

void* View::raw() const {
  if (buffer_ == nullptr) return nullptr;
  return static_cast<char*>(buffer_->base()) + byte_offset_;
}

float* View::f32() const {
  AIR_ENGINE_CHECK(buffer_ == nullptr || dtype_ == DType::kF32, "view is not F32");
  return static_cast<float*>(raw());
}

uint16_t* View::bf16() const {
  AIR_ENGINE_CHECK(buffer_ == nullptr || dtype_ == DType::kBF16, "view is not BF16");
  return static_cast<uint16_t*>(raw());
}

int32_t* View::i32() const {
  AIR_ENGINE_CHECK(buffer_ == nullptr || dtype_ == DType::kI32, "view is not I32");
  return static_cast<int32_t*>(raw());
}

double* View::f64() const {
  AIR_ENGINE_CHECK(buffer_ == nullptr || dtype_ == DType::kF64, "view is not F64");
  return static_cast<double*>(raw());
}

}  // namespace air::engine
