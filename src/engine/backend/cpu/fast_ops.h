// FastOps: the CPU fast path, the kernel of every op of engine/ops/ops.h (none inherited; the
// arguments are checked in front of them, by Ops' public methods):
// Gemm (blocked, packed, vectorized, threaded: fast_gemm.h for fp32, gemm_mixed.h's bf16 GEMM
// with fp32 sums for products with a BF16 operand), attention (per-head tiles through the same
// GEMMs: fast_attention.cc), the row-wise ops (RMSNorm, SwiGLU, RoPE, cross-entropy, embedding,
// bias: fp32 math spread over threads, BF16 rows widened into per-thread fp32 scratch and rounded
// back once, or for SwiGLU, the residual add and RMSNorm converted in registers:
// mixed_rowwise.h; fast_ops.cc, fast_rowwise.cc) and the optimizer's elementwise ops
// (fast_optimizer.cc). Results agree with the reference to float rounding;
// tests/unit/engine_core/ops_harness_test.cc checks each op and dtype with tolerances.
//
// Thread safety: owns a thread pool and per-thread scratch; calls must not overlap (ops.h).
#pragma once

#include <memory>
#include <vector>

#include "engine/backend/cpu/attention_tile.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/dropped_linear.h"
#include "engine/backend/cpu/fast_gemm.h"
#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/backend/cpu/gemm_narrow.h"
#include "engine/backend/cpu/thread_pool.h"

namespace air::engine {

class FastOps : public CpuBackend {
 public:
  // num_threads <= 0: DefaultThreadCount(). bf16_path: the bf16 GEMM's path (gemm_path.h
  // chooses it for CreateBackend; it must run on this CPU: GemmBf16PathRuns); the kernels
  // around the GEMM take native_bf16_path().
  explicit FastOps(int num_threads = 0, GemmBf16Path bf16_path = SelectedGemmBf16Path());

  std::string name() const override { return "fast"; }
  // "cpu, avx512bf16 kernels, bf16 GEMM onednn (brg:avx512_core_amx), 2 threads".
  std::string Describe() const override;
  int num_threads() const { return pool_->num_threads(); }
  GemmBf16Path bf16_path() const { return bf16_path_; }
  // The path of the kernels around the GEMM that have a vdpbf16ps form (attention's products
  // and fused tiles): when bf16_path is onednn (oneDNN takes the step's GEMMs only) the rule's
  // path without oneDNN (gemm_path.h's PathBesideOneDnn: avx512 on Intel, the kernel level's
  // native path elsewhere), else bf16_path itself, so that a conversion path chosen for a CPU
  // whose vdpbf16ps is slow or forced by AIR_CPU_PATH covers the whole step.
  GemmBf16Path native_bf16_path() const { return native_bf16_path_; }
  // F32 and BF16 for every op, as the reference.
  bool Supports(OpKind op, DType dtype) const override;
  // The avx512bf16 path's B panels (gemm_mixed.h's PackGemmBf16B) for a BF16 B over 16 columns.
  int64_t GemmPackedBBytes(int64_t n, int64_t k, DType dtype) const override;
  // Zero on the pool for large views (a step's gradient buffers: tens of MiB, else one thread's
  // memset while the others wait); a view under 2 MiB is one memset on the calling thread.
  void Zero(const View& dst) const override;

 protected:
  // Every op's kernel (ops.h: the public op has checked the arguments when a kernel runs).
  AIR_OPS_KERNELS(, override)

 private:
  // Per-thread fp32 scratch of at least n floats (slot 0..2 per thread: several rows at once).
  float* Scratch(int thread, int slot, int64_t n) const;
  // A small weight (norm weight, bias) as fp32 for the whole call: its own memory when F32, else
  // a widened copy in weight_scratch_ (read by every thread of the call).
  const float* WeightF32(const View& w) const;
  // AdamW over state of which some is BF16 (fast_optimizer.cc).
  void AdamWStaged(const AdamWScalars& s, const View& p, const View& g, const View& m,
                   const View& v, const View& p_copy) const;
  // An fp32 product into a BF16 C (see fast_ops.cc).
  void GemmStaged(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                  int64_t lda, const View& b, int64_t ldb, float beta, const View& c,
                  int64_t ldc) const;

  // Scratch is logically part of a call, not of the object's value.
  std::unique_ptr<ThreadPool> pool_;
  const GemmBf16Path bf16_path_;
  const GemmBf16Path native_bf16_path_;
  mutable GemmScratch gemm_scratch_;
  mutable GemmBf16Scratch gemm_bf16_scratch_;
  mutable NarrowGemmScratch narrow_gemm_scratch_;
  mutable DroppedLinearScratch dropped_linear_scratch_;
  mutable std::vector<std::vector<float>> attention_scratch_;      // per thread
  mutable std::vector<GemmScratch> gemm_serial_scratch_;           // per thread, inside tasks
  mutable std::vector<GemmBf16Scratch> gemm_bf16_serial_scratch_;  // per thread, inside tasks
  mutable std::vector<std::vector<float>> attention_staging_;      // per thread
  mutable std::vector<std::vector<uint16_t>> attention_bf16_;      // per thread: P, dS rounded
  mutable std::vector<float> attention_deltas_;                    // backward's dO . O per row
  mutable std::vector<AttentionTileScratch> attention_tiles_;      // per thread: fused tiles
  mutable std::vector<std::vector<double>> row_scratch_;           // per thread (norm weight grads)
  mutable std::vector<std::vector<float>> f32_scratch_;            // per thread x 3 slots
  mutable std::vector<float> weight_scratch_;                      // WeightF32's
};

}  // namespace air::engine
