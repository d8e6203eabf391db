// Tensor implementation (see tensor.h).
#include "engine/tensor.h"

#include <algorithm>
#include <cmath>

#include "engine/check.h"

namespace air::engine {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor::Tensor(Shape shape) : shape_(std::move(shape)) {
  for (int64_t d : shape_) AIR_ENGINE_CHECK(d >= 0, "negative dimension");
  data_.assign(static_cast<size_t>(NumElements(shape_)), 0.0f);
}

Tensor::Tensor(Shape shape, std::vector<float> values)
    : shape_(std::move(shape)), data_(std::move(values)) {
  AIR_ENGINE_CHECK(static_cast<int64_t>(data_.size()) == NumElements(shape_),
                   "value count does not match the shape");
}

int64_t Tensor::dim(int i) const {
  const int r = rank();
  if (i < 0) i += r;
  AIR_ENGINE_CHECK(i >= 0 && i < r, "dimension index out of range");
  return shape_[static_cast<size_t>(i)];
}

void Tensor::Fill(float value) { std::fill(data_.begin(), data_.end(), value); }

void Tensor::Reshape(Shape shape) {
  AIR_ENGINE_CHECK(NumElements(shape) == numel(), "reshape must keep the element count");
  shape_ = std::move(shape);
}

void Tensor::ResizeZeroed(Shape shape) {
  shape_ = std::move(shape);
  data_.assign(static_cast<size_t>(NumElements(shape_)), 0.0f);
}

float MaxAbsDiff(const Tensor& a, const Tensor& b) {
  AIR_ENGINE_CHECK(a.shape() == b.shape(), "MaxAbsDiff of tensors with different shapes");
  float m = 0.0f;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

double L2Norm(const Tensor& t) {
  double s = 0.0;
  for (float v : t.values()) s += static_cast<double>(v) * v;
  return std::sqrt(s);
}

}  // namespace air::engine
