// ReferenceOps: the CPU ground truth for every op in engine/ops/ops.h — plain fp32 loops, one
// thread, accumulation in double where a sum runs long, shapes in comments. BF16 data is widened
// to fp32 (exactly), computed by the same loops and rounded back once per output element, so
// the reference of a bf16 op is "the fp32 op on the bf16 inputs". Fast paths and future backends
// are tested against it; read reference_loops.cc to learn what an op computes.
// Thread safety: stateless; safe from any number of threads.
#pragma once

#include "engine/ops/cpu/cpu_backend.h"

namespace air::engine {

class ReferenceOps : public CpuBackend {
 public:
  std::string name() const override { return "reference"; }
  // Every op on F32; every op but the master-state ones (AdamW, SumOfSquares, Scale) on BF16.
  bool Supports(OpKind op, DType dtype) const override;

 protected:
  // Every op's kernel (ops.h: the public op has checked the arguments when a kernel runs).
  AIR_OPS_KERNELS(, override)
};

// Whether an op's data role exists at all: the master-state ops take F32 only (their inputs
// are fp32 master weights, gradients and moments on every backend).
bool IsMasterStateOp(OpKind op);

// sum of x[j]^2 in double, in index order (the reference's loop, reused by the fast path).
double SumOfSquaresLoop(const float* x, int64_t n);

// Whether key j is visible to query i under the mask rules of AttentionShape (shared by every
// implementation so they cannot disagree). `qi` is the query's index within its row, `kj` the
// key's; segments may be null.
inline bool AttentionVisible(const AttentionShape& s, int64_t b, int64_t qi, int64_t kj,
                             const int32_t* q_segments, const int32_t* kv_segments) {
  const int64_t q_abs = s.q_offset + qi;
  if (kj > q_abs) return false;
  if (s.sliding_window > 0 && q_abs - kj >= s.sliding_window) return false;
  if (q_segments != nullptr && q_segments[b * s.q_len + qi] != kv_segments[b * s.kv_rows() + kj]) {
    return false;
  }
  return true;
}

// cos/sin of one RoPE angle as every CPU implementation computes it: the fp32 product of the
// position and the inverse frequency (as transformers' matmul gives), then cos/sin in double,
// rounded to fp32, then the fp32 product with `scale` (YaRN's attention factor).
void RopeAngle(int32_t position, float inv_freq, float scale, float* cos_out, float* sin_out);

// Ops::MoeDispatch's counting sort on the calling thread: the whole kernel for every CPU backend
// (N*k small integers; ReferenceOps and FastOps both call it).
void CpuMoeDispatch(const View& indices, const View& offsets, const View& token_of_row,
                    const View& row_of_slot);

}  // namespace air::engine
