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

  void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const View& a, int64_t lda,
            const View& b, int64_t ldb, float beta, const View& c, int64_t ldc) const override;
  void EmbeddingForward(const View& ids, const View& table, const View& out) const override;
  void EmbeddingBackward(const View& ids, const View& dout, int32_t skip_id,
                         const View& dtable) const override;
  void RmsNormForward(const View& x, const View& w, float eps, const View& y,
                      const View& rstd) const override;
  void RmsNormBackward(const View& x, const View& w, const View& rstd, const View& dy,
                       const View& dx, const View& dw) const override;
  void RopeTables(const View& positions, const View& inv_freq, float scale, const View& cos,
                  const View& sin) const override;
  void RopeForward(const View& x, const View& cos, const View& sin) const override;
  void RopeBackward(const View& dx, const View& cos, const View& sin) const override;
  void AttentionForward(const AttentionShape& s, const View& q, const View& k, const View& v,
                        const View& sinks, const View& q_segments, const View& kv_segments,
                        const View& out, const View& lse) const override;
  void AttentionBackward(const AttentionShape& s, const View& q, const View& k, const View& v,
                         const View& sinks, const View& q_segments, const View& kv_segments,
                         const View& out, const View& lse, const View& dout, const View& dq,
                         const View& dk, const View& dv, const View& dsinks) const override;
  void SwigluForward(const View& gate, const View& up, const View& out) const override;
  void SwigluBackward(const View& gate, const View& up, const View& dout, const View& dgate,
                      const View& dup) const override;
  void ClampedSwigluForward(const View& gate_up, float alpha, float limit,
                            const View& out) const override;
  void ClampedSwigluBackward(const View& gate_up, float alpha, float limit, const View& dout,
                             const View& dgate_up) const override;
  void RouterTopK(const View& logits, const View& indices, const View& weights) const override;
  void RouterTopKBackward(const View& indices, const View& weights, const View& dweights,
                          const View& dlogits) const override;
  void MoeDispatch(const View& indices, const View& offsets, const View& token_of_row,
                   const View& row_of_slot) const override;
  void MoeGather(const View& x, const View& token_of_row, const View& grouped) const override;
  void MoeGatherBackward(const View& dgrouped, const View& row_of_slot,
                         const View& dx) const override;
  void MoeCombine(const View& y, const View& weights, const View& row_of_slot,
                  const View& out) const override;
  void MoeCombineBackward(const View& y, const View& weights, const View& row_of_slot,
                          const View& dout, const View& dy, const View& dweights) const override;
  void AddInPlace(const View& y, const View& x) const override;
  void AddBias(const View& y, const View& bias) const override;
  void BiasBackward(const View& dy, const View& dbias) const override;
  void Convert(const View& src, const View& dst) const override;
  void Dropout(const View& x, float p, uint64_t seed, const View& out) const override;
  void CrossEntropyForward(const View& logits, const View& targets, const View& lse,
                           const View& loss_sum) const override;
  void CrossEntropyBackward(const View& logits, const View& targets, const View& lse, float scale,
                            const View& dlogits) const override;
  void AdamWUpdate(const AdamWScalars& s, const View& p, const View& g, const View& m,
                   const View& v) const override;
  void SumOfSquares(const View& x, const View& sum) const override;
  void Scale(const View& x, float factor) const override;
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

// Ops::MoeDispatch's checks and its counting sort on the calling thread: the whole op for every
// CPU backend (N*k small integers; ReferenceOps and FastOps both call it).
void CpuMoeDispatch(const View& indices, const View& offsets, const View& token_of_row,
                    const View& row_of_slot);

}  // namespace air::engine
