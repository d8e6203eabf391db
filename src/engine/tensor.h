// Tensor: a host array — an fp32, row-major, contiguous block of numbers with a shape that owns
// its storage (a std::vector<float>), copies deeply and moves cheaply. It is what crosses the
// host boundary: weights read from or written to files, logits handed back to callers, test
// inputs and references. Training memory does not live in Tensors: it lives in Buffers owned by
// a Backend and is addressed through typed Views (engine/view.h, engine/backend/backend.h).
//
// Thread safety: a value type; distinct tensors may be used from different threads, one tensor
// may be read concurrently but not written while read.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace air::engine {

using Shape = std::vector<int64_t>;

// Product of the dimensions (1 for a scalar shape {}).
int64_t NumElements(const Shape& shape);
// "[2, 3, 4]".
std::string ShapeToString(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled tensor of the given shape.
  explicit Tensor(Shape shape);
  Tensor(std::initializer_list<int64_t> shape) : Tensor(Shape(shape)) {}
  // A tensor holding `values` (its size must equal the shape's element count; checked).
  Tensor(Shape shape, std::vector<float> values);

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // Dimension i; negative i counts from the end (-1 is the last).
  int64_t dim(int i) const;
  int64_t numel() const { return static_cast<int64_t>(data_.size()); }
  bool empty() const { return data_.empty(); }

  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::span<float> values() { return data_; }
  std::span<const float> values() const { return data_; }
  float& operator[](int64_t i) { return data_[static_cast<size_t>(i)]; }
  float operator[](int64_t i) const { return data_[static_cast<size_t>(i)]; }

  void Fill(float value);
  void SetZero() { Fill(0.0f); }
  // Changes the shape without touching the data; the element count must stay the same.
  void Reshape(Shape shape);
  // Makes the tensor hold `shape`, zero-filled, reusing the allocation when large enough.
  void ResizeZeroed(Shape shape);
  std::string ShapeString() const { return ShapeToString(shape_); }

 private:
  Shape shape_;
  std::vector<float> data_;
};

// Largest |a[i] - b[i]| (shapes must match; checked).
float MaxAbsDiff(const Tensor& a, const Tensor& b);
// sqrt(sum of squares), accumulated in double.
double L2Norm(const Tensor& t);

}  // namespace air::engine
