// Helpers for the per-op tests (ops_harness_test.cc, ops_gradcheck_test.cc): arrays in a
// backend's own memory in a chosen dtype, uploaded from and read back to fp32 host vectors, bf16
// rounding of host data, and the scaled error measure the harness reports.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/check.h"
#include "engine/dtype.h"

namespace air::engine::testing {

// max |a - b| / (1 + max |b|): relative to the scale of the result.
inline double ScaledMaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / (1.0 + scale);
}

// The values `dtype` can hold nearest to `v` (bf16: rounded to nearest even; F32: unchanged).
inline std::vector<float> RoundedTo(std::vector<float> v, DType dtype) {
  if (dtype == DType::kBF16) {
    for (float& x : v) x = Bf16ToF32(F32ToBf16(x));
  }
  return v;
}

// Views in a backend's memory made from host vectors, kept alive with the object.
class DeviceArrays {
 public:
  explicit DeviceArrays(const Backend& backend) : backend_(backend) {}

  // A float view of `dtype` holding `host` (rounded to the dtype), shaped `shape` (or flat).
  View Data(const std::vector<float>& host, DType dtype, Shape shape = {}) {
    if (shape.empty()) shape = {static_cast<int64_t>(host.size())};
    View view = Allocate(dtype, shape);
    backend_.FromHostTensor(view, host.data());
    return view;
  }
  View F32(const std::vector<float>& host, Shape shape = {}) {
    return Data(host, DType::kF32, std::move(shape));
  }
  View I32(const std::vector<int32_t>& host, Shape shape = {}) {
    if (shape.empty()) shape = {static_cast<int64_t>(host.size())};
    View view = Allocate(DType::kI32, shape);
    backend_.CopyToDevice(view, host.data());
    return view;
  }
  View U8(const std::vector<uint8_t>& host) {
    View view = Allocate(DType::kU8, {static_cast<int64_t>(host.size())});
    backend_.CopyToDevice(view, host.data());
    return view;
  }
  View F64(double value) {
    View view = Allocate(DType::kF64, {1});
    backend_.CopyToDevice(view, &value);
    return view;
  }
  std::vector<float> Get(const View& v) const {
    const Tensor t = backend_.ToHostTensor(v);
    return std::vector<float>(t.values().begin(), t.values().end());
  }
  std::vector<int32_t> GetI32(const View& v) const {
    std::vector<int32_t> out(static_cast<size_t>(v.numel()));
    backend_.CopyToHost(out.data(), v);
    return out;
  }
  std::vector<uint8_t> GetU8(const View& v) const {
    std::vector<uint8_t> out(static_cast<size_t>(v.numel()));
    backend_.CopyToHost(out.data(), v);
    return out;
  }
  double Scalar(const View& v) const { return backend_.ReadScalar(v); }

 private:
  View Allocate(DType dtype, const Shape& shape) {
    View view;
    auto buffer = backend_.AllocateView(dtype, shape, &view);
    AIR_ENGINE_CHECK(buffer.ok(), "allocation failed");
    buffers_.push_back(std::move(buffer).value());
    return view;
  }
  const Backend& backend_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

}  // namespace air::engine::testing
