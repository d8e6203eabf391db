// FastOps: the CPU fast path. Inherits every op from ReferenceOps and overrides the ones that
// dominate a training step: Gemm (blocked, packed, AVX-512, threaded: fast_gemm.h), attention
// (per-head tiles through the same GEMM: fast_attention.cc), and the row-wise ops (RMSNorm,
// SwiGLU, cross-entropy: fp32 and spread over threads) and the optimizer's elementwise ops. Results
// agree with the reference to float rounding; tests/unit/engine_core/ops_harness_test.cc checks
// each op with tolerances.
//
// Thread safety: owns a thread pool and per-thread scratch; calls must not overlap (ops.h).
#pragma once

#include <memory>
#include <vector>

#include "engine/ops/cpu/fast_gemm.h"
#include "engine/ops/cpu/reference_ops.h"
#include "engine/ops/cpu/thread_pool.h"

namespace air::engine {

class FastOps : public ReferenceOps {
 public:
  // num_threads <= 0: DefaultThreadCount().
  explicit FastOps(int num_threads = 0);

  std::string name() const override { return "fast"; }
  int num_threads() const { return pool_->num_threads(); }

  void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc) const override;

  void RmsNormForward(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                      float* y, float* rstd) const override;
  void RmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy,
                       int64_t rows, int64_t dim, float* dx, float* dw) const override;

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

  void CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n, int64_t vocab,
                           float* lse, double* loss_sum) const override;
  void CrossEntropyBackward(const float* logits, const int32_t* targets, const float* lse,
                            int64_t n, int64_t vocab, float scale, float* dlogits) const override;

  // fast_optimizer.cc: split over the threads, AVX-512 inside.
  void AdamWUpdate(const AdamWScalars& s, int64_t n, float* p, const float* g, float* m,
                   float* v) const override;
  void SumOfSquares(const float* x, int64_t n, double* sum) const override;
  void Scale(float* x, int64_t n, float factor) const override;

 private:
  // Scratch is logically part of a call, not of the object's value.
  std::unique_ptr<ThreadPool> pool_;
  mutable GemmScratch gemm_scratch_;
  mutable std::vector<std::vector<float>> attention_scratch_;  // per thread
  mutable std::vector<GemmScratch> gemm_serial_scratch_;       // per thread, inside tasks
  mutable std::vector<std::vector<double>> row_scratch_;       // per thread (norm weight grads)
};

}  // namespace air::engine
