// ReferenceOps: the CPU ground truth for every op in engine/ops/ops.h — plain loops, one
// thread, accumulation in double where a sum runs long, shapes in comments. Fast paths and
// future backends are tested against it; read it to learn what an op computes.
// Thread safety: stateless; safe from any number of threads.
#pragma once

#include "engine/ops/cpu/cpu_backend.h"

namespace air::engine {

class ReferenceOps : public CpuBackend {
 public:
  std::string name() const override { return "reference"; }

  void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc) const override;

  void EmbeddingForward(const int32_t* ids, int64_t n, const float* table, int64_t dim,
                        float* out) const override;
  void EmbeddingBackward(const int32_t* ids, int64_t n, const float* dout, int64_t dim,
                         int32_t skip_id, float* dtable) const override;

  void RmsNormForward(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                      float* y, float* rstd) const override;
  void RmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy,
                       int64_t rows, int64_t dim, float* dx, float* dw) const override;

  void RopeForward(float* x, int64_t n, int64_t heads, int64_t head_dim, const float* cos,
                   const float* sin) const override;
  void RopeBackward(float* dx, int64_t n, int64_t heads, int64_t head_dim, const float* cos,
                    const float* sin) const override;

  void AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const int32_t* q_segments, const int32_t* kv_segments, float* out,
                        float* lse) const override;
  void AttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v,
                         const int32_t* q_segments, const int32_t* kv_segments, const float* out,
                         const float* lse, const float* dout, float* dq, float* dk,
                         float* dv) const override;

  void SwigluForward(const float* gate, const float* up, int64_t n, float* out) const override;
  void SwigluBackward(const float* gate, const float* up, const float* dout, int64_t n,
                      float* dgate, float* dup) const override;

  void AddInPlace(float* y, const float* x, int64_t n) const override;
  void AddBias(float* y, const float* bias, int64_t rows, int64_t cols) const override;
  void BiasBackward(const float* dy, int64_t rows, int64_t cols, float* dbias) const override;

  void CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n, int64_t vocab,
                           float* lse, double* loss_sum) const override;
  void CrossEntropyBackward(const float* logits, const int32_t* targets, const float* lse,
                            int64_t n, int64_t vocab, float scale, float* dlogits) const override;

  void AdamWUpdate(const AdamWScalars& s, int64_t n, float* p, const float* g, float* m,
                   float* v) const override;
  void SumOfSquares(const float* x, int64_t n, double* sum) const override;
  void Scale(float* x, int64_t n, float factor) const override;
};

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

}  // namespace air::engine
