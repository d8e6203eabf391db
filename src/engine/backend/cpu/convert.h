// Element conversions for the CPU backends: bf16 <-> fp32 over arrays (AVX-512 when the CPU
// has it: bf16 -> fp32 is exact, a shift; fp32 -> bf16 rounds to nearest even and keeps NaN a
// quiet NaN, the same bits as engine/dtype.h's scalar F32ToBf16), and the staging helpers the
// ops use to read any data view as fp32 and write fp32 results into a view of either dtype.
// Thread safety: functions are pure; a staging object belongs to one call.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/view.h"

namespace air::engine {

void WidenBf16(const uint16_t* src, float* dst, int64_t n);
void RoundToBf16(const float* src, uint16_t* dst, int64_t n);

// dst[0, n) = elements [offset, offset + n) of a data view (F32 or BF16) as fp32.
void LoadF32(const View& v, int64_t offset, int64_t n, float* dst);
// Elements [offset, offset + n) of a data view = src (rounded when the view is BF16).
void StoreF32(const float* src, const View& v, int64_t offset, int64_t n);

// Elements [offset, offset + n) of a data view += src: one fp32 add each, rounded once when the
// view is BF16 (an accumulating output's last step: a gradient of the step's bf16 state).
void AccumulateF32(const float* src, const View& v, int64_t offset, int64_t n);

// Row staging for the fast ops: elements [offset, offset + n) of a data view as fp32 — a
// pointer into the view when it is F32, else `scratch` (n floats) holding the widened values.
inline const float* ReadF32(const View& v, int64_t offset, int64_t n, float* scratch) {
  if (v.dtype() == DType::kF32) return v.f32() + offset;
  LoadF32(v, offset, n, scratch);
  return scratch;
}
// Where to compute fp32 results for elements [offset, ...) of a data view: the view itself when
// F32, else `scratch`; CommitF32 then rounds scratch into a BF16 view (a no-op for F32).
inline float* WriteF32(const View& v, int64_t offset, float* scratch) {
  return v.dtype() == DType::kF32 ? v.f32() + offset : scratch;
}
inline void CommitF32(const float* computed, const View& v, int64_t offset, int64_t n) {
  if (v.dtype() != DType::kF32) StoreF32(computed, v, offset, n);
}

// A data view read as fp32: the view's own memory when it is F32, else a widened copy.
class F32Input {
 public:
  explicit F32Input(const View& v);
  const float* get() const { return ptr_; }

 private:
  std::vector<float> copy_;
  const float* ptr_ = nullptr;
};

// A data view written as fp32: the view's own memory when it is F32; else an fp32 scratch
// (holding the view's current values when `load`, for accumulating ops) that Store() rounds
// into the view.
class F32Output {
 public:
  F32Output(const View& v, bool load);
  float* get() { return ptr_; }
  void Store();

 private:
  View view_;
  std::vector<float> copy_;
  float* ptr_ = nullptr;
};

}  // namespace air::engine
