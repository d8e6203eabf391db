// FastOps: construction, support, the GEMM entry point, RMSNorm and cross-entropy (see
// fast_ops.h). The elementwise and embedding/RoPE ops are in fast_rowwise.cc, attention in
// fast_attention.cc, the optimizer's ops in fast_optimizer.cc.
#include "engine/backend/cpu/fast_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/backend/cpu/convert.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/dropped_linear.h"
#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/backend/cpu/gemm_path.h"
#include "engine/backend/cpu/mixed_rowwise.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/cpu/vec_math.h"
#include "engine/data/batch.h"
#include "engine/dtype.h"
#include "engine/ops/op_checks.h"

namespace air::engine {

FastOps::FastOps(int num_threads, GemmBf16Path bf16_path)
    : pool_(std::make_unique<ThreadPool>(num_threads > 0 ? num_threads : DefaultThreadCount())),
      bf16_path_(bf16_path),
      native_bf16_path_(bf16_path == GemmBf16Path::kOneDnn ? PathBesideOneDnn() : bf16_path) {
  const auto threads = static_cast<size_t>(pool_->num_threads());
  attention_scratch_.resize(threads);
  gemm_serial_scratch_.resize(threads);
  gemm_bf16_serial_scratch_.resize(threads);
  attention_staging_.resize(threads);
  attention_bf16_.resize(threads);
  attention_tiles_.resize(threads);
  row_scratch_.resize(threads);
  f32_scratch_.resize(3 * threads);
}

std::string FastOps::Describe() const {
  const int threads = pool_->num_threads();
  return std::string("cpu, ") + CpuKernelsName(SelectedCpuKernels()) + " kernels, bf16 GEMM " +
         DescribeGemmBf16Path(bf16_path_) + ", " + std::to_string(threads) +
         (threads == 1 ? " thread" : " threads");
}

bool FastOps::Supports(OpKind, DType dtype) const {
  return dtype == DType::kF32 || dtype == DType::kBF16;
}

void FastOps::Zero(const View& dst) const {
  constexpr int64_t kLine = 64, kMinLinesPerThread = int64_t{1} << 14;  // 1 MiB
  const int64_t bytes = static_cast<int64_t>(dst.bytes());
  char* base = static_cast<char*>(dst.raw());
  pool_->ParallelFor((bytes + kLine - 1) / kLine, kMinLinesPerThread,
                     [&](int64_t begin, int64_t end, int) {
                       const int64_t from = begin * kLine, to = std::min(bytes, end * kLine);
                       std::memset(base + from, 0, static_cast<size_t>(to - from));
                     });
}

const float* FastOps::WeightF32(const View& w) const {
  if (w.dtype() == DType::kF32) return w.f32();
  if (static_cast<int64_t>(weight_scratch_.size()) < w.numel()) {
    weight_scratch_.resize(static_cast<size_t>(w.numel()));
  }
  LoadF32(w, 0, w.numel(), weight_scratch_.data());
  return weight_scratch_.data();
}

float* FastOps::Scratch(int thread, int slot, int64_t n) const {
  std::vector<float>& buffer = f32_scratch_[static_cast<size_t>(3 * thread + slot)];
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

void FastOps::GemmKernel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                         int64_t lda, const View& b, int64_t ldb, float beta, const View& c,
                         int64_t ldc) const {
  // A BF16 operand makes it a bf16 product (gemm_mixed.h, on this backend's path).
  if (k > 0 && (a.dtype() == DType::kBF16 || b.dtype() == DType::kBF16)) {
    const GemmOperand ga{a.raw(), a.dtype() == DType::kBF16, lda, trans_a};
    const GemmOperand gb{b.raw(), b.dtype() == DType::kBF16, ldb, trans_b};
    const GemmResult gc{c.raw(), c.dtype() == DType::kBF16, ldc};
    // The avx512 conversion path's products with a side of at most 16 (LoRA's rank-r ones).
    if (bf16_path_ == GemmBf16Path::kAvx512 && NarrowGemmApplies(m, n, k)) {
      NarrowGemmBf16(*pool_, narrow_gemm_scratch_, m, n, k, ga, gb, beta, gc);
      return;
    }
    GemmBf16OnPath(bf16_path_, pool_.get(), gemm_bf16_scratch_, m, n, k, ga, gb, beta, gc);
    return;
  }
  // fp32 operands with a side of at most 16 (LoRA's rank-r products): gemm_narrow.h.
  if (NarrowGemmApplies(m, n, k)) {
    NarrowGemm(*pool_, narrow_gemm_scratch_, trans_a, trans_b, m, n, k, a.f32(), lda, b.f32(), ldb,
               beta, {c.raw(), c.dtype() == DType::kBF16, ldc});
    return;
  }
  if (c.dtype() == DType::kF32) {
    FastGemm(*pool_, gemm_scratch_, trans_a, trans_b, m, n, k, k > 0 ? a.f32() : nullptr, lda,
             k > 0 ? b.f32() : nullptr, ldb, beta, c.f32(), ldc);
    return;
  }
  GemmStaged(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

// On the avx512bf16 path a bf16 product packs the dropped operand through its mask
// (gemm_mixed.h's GemmOperand::drop_bits: the values ApplyDropoutMask writes, so the same bits
// as through scratch) instead of writing it out and reading it back; on the avx512 path the
// narrow GEMM reads it through the mask the same way (LoRA's x A^T and du^T x); other paths and
// fp32 products go through scratch.
void FastOps::GemmDroppedKernel(bool drop_b, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                int64_t k, const View& a, int64_t lda, const View& b, int64_t ldb,
                                float beta, const View& c, int64_t ldc, const View& bits, float p,
                                const View& scratch) const {
  const bool bf16_product = a.dtype() == DType::kBF16 || b.dtype() == DType::kBF16;
  const bool narrow = bf16_product && bf16_path_ == GemmBf16Path::kAvx512 && m > 0 && n > 0 &&
                      k > 0 && NarrowGemmApplies(m, n, k);
  if (m <= 0 || n <= 0 || k <= 0 || !bf16_product ||
      (bf16_path_ != GemmBf16Path::kAvx512Bf16 && !narrow)) {
    return GemmDroppedThroughScratch(drop_b, trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c,
                                     ldc, bits, p, scratch);
  }
  GemmOperand ga{a.raw(), a.dtype() == DType::kBF16, lda, trans_a};
  GemmOperand gb{b.raw(), b.dtype() == DType::kBF16, ldb, trans_b};
  GemmOperand& dropped = drop_b ? gb : ga;
  dropped.drop_bits = static_cast<const uint8_t*>(bits.raw());
  dropped.drop_bytes = bits.numel();
  dropped.drop_scale = 1.0f / (1.0f - p);  // ApplyDropoutMask's
  const GemmResult gc{c.raw(), c.dtype() == DType::kBF16, ldc};
  if (narrow) return NarrowGemmBf16(*pool_, narrow_gemm_scratch_, m, n, k, ga, gb, beta, gc);
  GemmBf16OnPath(bf16_path_, pool_.get(), gemm_bf16_scratch_, m, n, k, ga, gb, beta, gc);
}

// On the avx512bf16 path a bf16 product over one K slice adds its tiles through the mask as it
// stores them (into an F32 or a BF16 c) (gemm_mixed.h's GemmResult::kept_bits: ApplyDropoutMask's
// operations, so the same bits as through scratch) instead of writing the product out and
// reading it back; so does the narrow GEMM, where Gemm takes it (LoRA's du A: fp32 operands, or
// bf16 ones on the avx512 path); the rest go through scratch.
void FastOps::GemmAddDroppedKernel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                   const View& a, int64_t lda, const View& b, int64_t ldb,
                                   const View& c, const View& bits, float p,
                                   const View& scratch) const {
  const bool bf16_product = a.dtype() == DType::kBF16 || b.dtype() == DType::kBF16;
  if (m > 0 && n > 0 && k > 0 && NarrowGemmApplies(m, n, k) &&
      (!bf16_product || bf16_path_ == GemmBf16Path::kAvx512)) {
    GemmResult gc{c.raw(), c.dtype() == DType::kBF16, n};
    gc.kept_bits = static_cast<const uint8_t*>(bits.raw());
    gc.kept_bytes = bits.numel();
    gc.kept_scale = 1.0f / (1.0f - p);  // ApplyDropoutMask's
    if (!bf16_product) {
      return NarrowGemm(*pool_, narrow_gemm_scratch_, trans_a, trans_b, m, n, k, a.f32(), lda,
                        b.f32(), ldb, 1.0f, gc);
    }
    return NarrowGemmBf16(*pool_, narrow_gemm_scratch_, m, n, k,
                          {a.raw(), a.dtype() == DType::kBF16, lda, trans_a},
                          {b.raw(), b.dtype() == DType::kBF16, ldb, trans_b}, 1.0f, gc);
  }
  if (m <= 0 || n <= 0 || k <= 0 || k > kGemmBf16PairSlice || !bf16_product ||
      bf16_path_ != GemmBf16Path::kAvx512Bf16) {
    return GemmAddDroppedThroughScratch(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, bits, p,
                                        scratch);
  }
  const GemmOperand ga{a.raw(), a.dtype() == DType::kBF16, lda, trans_a};
  const GemmOperand gb{b.raw(), b.dtype() == DType::kBF16, ldb, trans_b};
  GemmResult gc{c.raw(), c.dtype() == DType::kBF16, n};
  gc.kept_bits = static_cast<const uint8_t*>(bits.raw());
  gc.kept_bytes = bits.numel();
  gc.kept_scale = 1.0f / (1.0f - p);  // ApplyDropoutMask's
  GemmBf16OnPath(bf16_path_, pool_.get(), gemm_bf16_scratch_, m, n, k, ga, gb, 1.0f, gc);
}

int64_t FastOps::GemmPackedBBytes(int64_t n, int64_t k, DType dtype) const {
  return GemmBf16PackedBBytes(bf16_path_, n, k, dtype);
}

void FastOps::PackGemmBKernel(bool trans_b, int64_t n, int64_t k, const View& b, int64_t ldb,
                              const View& packed) const {
  PackGemmBf16B(pool_.get(), n, k, {b.raw(), true, ldb, trans_b},
                static_cast<uint32_t*>(packed.raw()));
}

void FastOps::GemmPackedBKernel(int64_t m, int64_t n, int64_t k, const View& a, int64_t lda,
                                const View& packed, float beta, const View& c, int64_t ldc) const {
  const GemmOperand ga{a.raw(), a.dtype() == DType::kBF16, lda, false};
  GemmOperand gb{nullptr, true, 0, false};
  gb.packed = static_cast<const uint32_t*>(packed.raw());
  const GemmResult gc{c.raw(), c.dtype() == DType::kBF16, ldc};
  GemmBf16OnPath(bf16_path_, pool_.get(), gemm_bf16_scratch_, m, n, k, ga, gb, beta, gc);
}

// On the avx512bf16 path, for ranks up to 16 and a BF16 x, LoRA's A backward in one pass over x,
// its mask and dx (dropped_linear.h: the definition's bits); the rest run the definition.
void FastOps::DroppedLinearBackwardKernel(int64_t n, int64_t r, int64_t in, const View& x,
                                          const View& bits, float p, const View& w, const View& dy,
                                          float beta, const View& w_grad, const View& dx,
                                          const View& x_scratch, const View& f32_scratch) const {
  const bool has_dx = !dx.empty();
  if (!DroppedLinearBackwardRuns(bf16_path_, n, r, in, x.dtype() == DType::kBF16,
                                 w.dtype() == DType::kBF16, w_grad.dtype() == DType::kF32,
                                 has_dx)) {
    return DroppedLinearBackwardInTwo(n, r, in, x, bits, p, w, dy, beta, w_grad, dx, x_scratch,
                                      f32_scratch);
  }
  const DroppedLinearGrads g{n,
                             r,
                             in,
                             static_cast<const uint16_t*>(x.raw()),
                             static_cast<const uint8_t*>(bits.raw()),
                             bits.numel(),
                             1.0f / (1.0f - p),  // ApplyDropoutMask's
                             has_dx ? static_cast<const uint16_t*>(w.raw()) : nullptr,
                             dy.raw(),
                             dy.dtype() == DType::kBF16,
                             beta,
                             w_grad.f32(),
                             has_dx ? dx.raw() : nullptr,
                             has_dx && dx.dtype() == DType::kBF16};
  FusedDroppedLinearBackward(*pool_, dropped_linear_scratch_, g);
}

// On the avx512bf16 path, with A and A2 BF16 (LoRA's x and u of a bf16 model), both products
// run in one set of accumulators per tile (gemm_mixed.h's GemmBf16ConcatK): C is written once,
// never read back for the second product; the rest run the definition.
void FastOps::GemmConcatKKernel(bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                                int64_t lda, const View& b, int64_t ldb, int64_t k2, const View& a2,
                                int64_t lda2, const View& b2, int64_t ldb2, const View& c,
                                const View& scratch) const {
  const GemmOperand ga{a.raw(), a.dtype() == DType::kBF16, lda, false};
  const GemmOperand ga2{a2.raw(), a2.dtype() == DType::kBF16, lda2, false};
  const GemmResult gc{c.raw(), c.dtype() == DType::kBF16, n};
  if (m <= 0 || n <= 0 || !GemmBf16ConcatKRuns(bf16_path_, k, ga, k2, ga2, gc)) {
    return GemmConcatKInTwo(trans_b, m, n, k, a, lda, b, ldb, k2, a2, lda2, b2, ldb2, c, scratch);
  }
  const GemmOperand gb{b.raw(), b.dtype() == DType::kBF16, ldb, trans_b};
  const GemmOperand gb2{b2.raw(), b2.dtype() == DType::kBF16, ldb2, trans_b};
  GemmBf16ConcatK(pool_.get(), gemm_bf16_scratch_, m, n, k, ga, gb, k2, ga2, gb2, 0.0f, gc);
}

// An fp32 product into a BF16 C (or a BF16 C scaled by beta when K is 0): the fp32 kernel on an
// fp32 staging of C, rounded once.
void FastOps::GemmStaged(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                         int64_t lda, const View& b, int64_t ldb, float beta, const View& c,
                         int64_t ldc) const {
  const int64_t c_span = MatrixSpan(m, n, ldc);
  float* c32 = Scratch(0, 2, c_span);
  // Loaded even for beta 0: a strided C's gaps between rows are staged and written back too.
  LoadF32(c, 0, c_span, c32);
  FastGemm(*pool_, gemm_scratch_, trans_a, trans_b, m, n, k, k > 0 ? a.f32() : nullptr, lda,
           k > 0 ? b.f32() : nullptr, ldb, beta, c32, ldc);
  StoreF32(c32, c, 0, c_span);
}

namespace {
// Rows per task so that a task has at least ~16k elements of work.
int64_t MinRows(int64_t dim) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, dim)); }
}  // namespace

// y (N, C) = w * x * rstd, rows spread over threads.
void FastOps::RmsNormForwardKernel(const View& x, const View& w, float eps, const View& y,
                                   const View& rstd) const {
  const int64_t dim = w.numel(), rows = x.numel() / dim;
  const float* w_copy = WeightF32(w);
  const bool mixed = MixedRowwiseRuns();  // bf16 converted in registers
  pool_->ParallelForBalanced(rows, MinRows(dim), [&](int64_t begin, int64_t end, int thread) {
    for (int64_t r = begin; r < end; ++r) {
      if (mixed) {
        rstd.f32()[r] =
            RmsNormForwardRowMixed(MixedAt(x, r * dim), w_copy, eps, dim, MixedAt(y, r * dim));
        continue;
      }
      const float* xr = ReadF32(x, r * dim, dim, Scratch(thread, 0, dim));
      float partial[8] = {};
      int64_t c = 0;
      for (; c + 8 <= dim; c += 8) {
        for (int u = 0; u < 8; ++u) partial[u] += xr[c + u] * xr[c + u];
      }
      double sum_sq = 0.0;
      for (float p : partial) sum_sq += p;
      for (; c < dim; ++c) sum_sq += static_cast<double>(xr[c]) * xr[c];
      const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / dim + eps));
      rstd.f32()[r] = inv;
      float* yr = WriteF32(y, r * dim, Scratch(thread, 1, dim));
      for (c = 0; c < dim; ++c) yr[c] = w_copy[c] * (xr[c] * inv);
      CommitF32(yr, y, r * dim, dim);
    }
  });
}

// dx += rstd * w * dy - rstd^3 / C * x * sum(w * dy * x); dw += dy * x * rstd (per-thread
// partial sums, added in thread order so the result is deterministic).
void FastOps::RmsNormBackwardKernel(const View& x, const View& w, const View& rstd, const View& dy,
                                    const View& dx, const View& dw) const {
  const int64_t dim = w.numel(), rows = x.numel() / dim;
  const float* w_copy = WeightF32(w);
  const int64_t min_rows = MinRows(dim);
  const int64_t chunks =
      std::min<int64_t>(pool_->num_threads(), std::max<int64_t>(1, rows / min_rows));
  const bool want_dw = !dw.empty();  // a frozen weight (LoRA) takes no gradient
  for (int64_t t = 0; t < chunks && want_dw; ++t) {
    row_scratch_[static_cast<size_t>(t)].assign(static_cast<size_t>(dim), 0.0);
  }
  const bool mixed = MixedRowwiseRuns();  // bf16 converted in registers
  pool_->ParallelFor(rows, min_rows, [&](int64_t begin, int64_t end, int thread) {
    double* dw_partial = want_dw ? row_scratch_[static_cast<size_t>(thread)].data() : nullptr;
    for (int64_t r = begin; r < end; ++r) {
      if (mixed) {
        const Bf16OrF32 xr = MixedAt(x, r * dim), dyr = MixedAt(dy, r * dim);
        const float inv = rstd.f32()[r];
        const double dot = SumOfProductsMixed(F32Array(w_copy), dyr, xr, dim);
        const float coef = static_cast<float>(static_cast<double>(inv) * inv * inv * dot / dim);
        RmsNormBackwardRowMixed(w_copy, dyr, xr, inv, coef, dim, MixedAt(dx, r * dim), dw_partial);
        continue;
      }
      const float* xr = ReadF32(x, r * dim, dim, Scratch(thread, 0, dim));
      const float* dyr = ReadF32(dy, r * dim, dim, Scratch(thread, 1, dim));
      const float inv = rstd.f32()[r];
      const double dot = SumOfProducts(w_copy, dyr, xr, dim);
      const float coef = static_cast<float>(static_cast<double>(inv) * inv * inv * dot / dim);
      float* dxr = WriteF32(dx, r * dim, Scratch(thread, 2, dim));
      if (dx.dtype() != DType::kF32) LoadF32(dx, r * dim, dim, dxr);  // dx accumulates
      RmsNormBackwardRow(w_copy, dyr, xr, inv, coef, dim, dxr, dw_partial);
      CommitF32(dxr, dx, r * dim, dim);
    }
  });
  if (!want_dw) return;
  std::vector<float> sums(static_cast<size_t>(dim));
  for (int64_t c = 0; c < dim; ++c) {
    double sum = 0.0;
    for (int64_t t = 0; t < chunks; ++t) sum += row_scratch_[static_cast<size_t>(t)][c];
    sums[static_cast<size_t>(c)] = static_cast<float>(sum);
  }
  AccumulateF32(sums.data(), dw, 0, dim);
}

// Per-row log-sum-exp in fp32 with a double accumulator for the sum of exponentials; the loss
// sum is added in thread order.
void FastOps::CrossEntropyForwardKernel(const View& logits, const View& targets, const View& lse,
                                        const View& loss_sum) const {
  const int64_t n = targets.numel(), vocab = n > 0 ? logits.numel() / n : 0;
  std::vector<double> partial(static_cast<size_t>(pool_->num_threads()), 0.0);
  pool_->ParallelFor(n, MinRows(vocab), [&](int64_t begin, int64_t end, int thread) {
    double total = 0.0;
    for (int64_t r = begin; r < end; ++r) {
      const float* row = ReadF32(logits, r * vocab, vocab, Scratch(thread, 0, vocab));
      const float max_logit = MaxOf(row + 1, vocab - 1, row[0]);
      const double sum = ExpShifted(row, max_logit, 1.0f, vocab, nullptr);
      const double row_lse = max_logit + std::log(sum);
      lse.f32()[r] = static_cast<float>(row_lse);
      const int32_t target = targets.i32()[r];
      if (target != kIgnoreIndex) total += row_lse - row[target];
    }
    partial[static_cast<size_t>(thread)] = total;
  });
  double total = 0.0;
  for (double p : partial) total += p;
  *loss_sum.f64() += total;
}

void FastOps::CrossEntropyBackwardKernel(const View& logits, const View& targets, const View& lse,
                                         float scale, const View& dlogits) const {
  const int64_t n = targets.numel(), vocab = n > 0 ? logits.numel() / n : 0;
  pool_->ParallelForBalanced(n, MinRows(vocab), [&](int64_t begin, int64_t end, int thread) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = ReadF32(logits, r * vocab, vocab, Scratch(thread, 0, vocab));
      float* drow = WriteF32(dlogits, r * vocab, Scratch(thread, 1, vocab));
      const int32_t target = targets.i32()[r];
      if (target == kIgnoreIndex) {
        std::fill(drow, drow + vocab, 0.0f);
      } else {
        ExpShifted(row, lse.f32()[r], scale, vocab, drow);
        drow[target] -= scale;
      }
      CommitF32(drow, dlogits, r * vocab, vocab);
    }
  });
}

}  // namespace air::engine
