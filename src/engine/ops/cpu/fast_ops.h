// FastOps: the CPU fast path, every op of engine/ops/ops.h implemented here (none inherited):
// Gemm (blocked, packed, vectorized, threaded: fast_gemm.h for fp32, gemm_mixed.h's bf16 GEMM
// with fp32 sums for products with a BF16 operand), attention (per-head tiles through the same
// GEMMs: fast_attention.cc), the row-wise ops (RMSNorm, SwiGLU, RoPE, cross-entropy, embedding,
// bias: fp32 math spread over threads, BF16 rows widened into per-thread fp32 scratch and rounded
// back once: fast_ops.cc, fast_rowwise.cc) and the optimizer's elementwise ops (fast_optimizer.cc).
// Results agree with the reference to float rounding; tests/unit/engine_core/ops_harness_test.cc
// checks each op and dtype with tolerances.
//
// Thread safety: owns a thread pool and per-thread scratch; calls must not overlap (ops.h).
#pragma once

#include <memory>
#include <vector>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/ops/cpu/fast_gemm.h"
#include "engine/ops/cpu/gemm_mixed.h"
#include "engine/ops/cpu/thread_pool.h"

namespace air::engine {

class FastOps : public CpuBackend {
 public:
  // num_threads <= 0: DefaultThreadCount().
  explicit FastOps(int num_threads = 0);

  std::string name() const override { return "fast"; }
  int num_threads() const { return pool_->num_threads(); }
  // F32 and BF16 for every op but the master-state ones (F32 only), as the reference.
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

 private:
  // Per-thread fp32 scratch of at least n floats (slot 0..2 per thread: several rows at once).
  float* Scratch(int thread, int slot, int64_t n) const;
  // A small weight (norm weight, bias) as fp32 for the whole call: its own memory when F32, else
  // a widened copy in weight_scratch_ (read by every thread of the call).
  const float* WeightF32(const View& w) const;
  // An fp32 product into a BF16 C (see fast_ops.cc).
  void GemmStaged(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                  int64_t lda, const View& b, int64_t ldb, float beta, const View& c,
                  int64_t ldc) const;

  // Scratch is logically part of a call, not of the object's value.
  std::unique_ptr<ThreadPool> pool_;
  mutable GemmScratch gemm_scratch_;
  mutable GemmBf16Scratch gemm_bf16_scratch_;
  mutable std::vector<std::vector<float>> attention_scratch_;      // per thread
  mutable std::vector<GemmScratch> gemm_serial_scratch_;           // per thread, inside tasks
  mutable std::vector<GemmBf16Scratch> gemm_bf16_serial_scratch_;  // per thread, inside tasks
  mutable std::vector<std::vector<float>> attention_staging_;      // per thread
  mutable std::vector<std::vector<uint16_t>> attention_bf16_;      // per thread: P, dS rounded
  mutable std::vector<std::vector<double>> row_scratch_;           // per thread (norm weight grads)
  mutable std::vector<std::vector<float>> f32_scratch_;            // per thread x 3 slots
  mutable std::vector<float> weight_scratch_;                      // WeightF32's
};

}  // namespace air::engine
