// FastOps: the threaded fp32 row-wise ops and the GEMM entry point (see fast_ops.h). Attention
// lives in fast_attention.cc.
#include "engine/ops/cpu/fast_ops.h"

#include <algorithm>
#include <cmath>

#include "engine/data/batch.h"
#include "engine/ops/cpu/vec_math.h"

namespace air::engine {

FastOps::FastOps(int num_threads)
    : pool_(std::make_unique<ThreadPool>(num_threads > 0 ? num_threads : DefaultThreadCount())) {
  const auto threads = static_cast<size_t>(pool_->num_threads());
  attention_scratch_.resize(threads);
  gemm_serial_scratch_.resize(threads);
  row_scratch_.resize(threads);
}

void FastOps::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc) const {
  FastGemm(*pool_, gemm_scratch_, trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

namespace {
// Rows per task so that a task has at least ~16k elements of work.
int64_t MinRows(int64_t dim) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, dim)); }
}  // namespace

// y (N, C) = w * x * rstd, rows spread over threads.
void FastOps::RmsNormForward(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                             float* y, float* rstd) const {
  pool_->ParallelFor(rows, MinRows(dim), [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * dim;
      float partial[8] = {};
      int64_t c = 0;
      for (; c + 8 <= dim; c += 8) {
        for (int u = 0; u < 8; ++u) partial[u] += xr[c + u] * xr[c + u];
      }
      double sum_sq = 0.0;
      for (float p : partial) sum_sq += p;
      for (; c < dim; ++c) sum_sq += static_cast<double>(xr[c]) * xr[c];
      const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / dim + eps));
      rstd[r] = inv;
      float* yr = y + r * dim;
      for (c = 0; c < dim; ++c) yr[c] = w[c] * (xr[c] * inv);
    }
  });
}

// dx += rstd * w * dy - rstd^3 / C * x * sum(w * dy * x); dw += dy * x * rstd (per-thread
// partial sums, added in thread order so the result is deterministic).
void FastOps::RmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy,
                              int64_t rows, int64_t dim, float* dx, float* dw) const {
  const int64_t min_rows = MinRows(dim);
  const int64_t chunks =
      std::min<int64_t>(pool_->num_threads(), std::max<int64_t>(1, rows / min_rows));
  for (int64_t t = 0; t < chunks; ++t) {
    row_scratch_[static_cast<size_t>(t)].assign(static_cast<size_t>(dim), 0.0);
  }
  pool_->ParallelFor(rows, min_rows, [&](int64_t begin, int64_t end, int thread) {
    double* dw_partial = row_scratch_[static_cast<size_t>(thread)].data();
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * dim;
      const float* dyr = dy + r * dim;
      const float inv = rstd[r];
      double dot = 0.0;
      for (int64_t c = 0; c < dim; ++c) dot += w[c] * dyr[c] * xr[c];
      const float coef = static_cast<float>(static_cast<double>(inv) * inv * inv * dot / dim);
      float* dxr = dx + r * dim;
      for (int64_t c = 0; c < dim; ++c) {
        dxr[c] += inv * w[c] * dyr[c] - coef * xr[c];
        dw_partial[c] += dyr[c] * xr[c] * inv;
      }
    }
  });
  if (dw == nullptr) return;
  for (int64_t c = 0; c < dim; ++c) {
    double sum = 0.0;
    for (int64_t t = 0; t < chunks; ++t) sum += row_scratch_[static_cast<size_t>(t)][c];
    dw[c] += static_cast<float>(sum);
  }
}

void FastOps::SwigluForward(const float* gate, const float* up, int64_t n, float* out) const {
  pool_->ParallelFor(n, 1 << 14, [&](int64_t begin, int64_t end, int) {
    SwigluForwardRange(gate + begin, up + begin, end - begin, out + begin);
  });
}

void FastOps::SwigluBackward(const float* gate, const float* up, const float* dout, int64_t n,
                             float* dgate, float* dup) const {
  pool_->ParallelFor(n, 1 << 14, [&](int64_t begin, int64_t end, int) {
    SwigluBackwardRange(gate + begin, up + begin, dout + begin, end - begin, dgate + begin,
                        dup + begin);
  });
}

// Per-row log-sum-exp in fp32 with a double accumulator for the sum of exponentials; the loss
// sum is added in thread order.
void FastOps::CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n,
                                  int64_t vocab, float* lse, double* loss_sum) const {
  std::vector<double> partial(static_cast<size_t>(pool_->num_threads()), 0.0);
  pool_->ParallelFor(n, MinRows(vocab), [&](int64_t begin, int64_t end, int thread) {
    double total = 0.0;
    for (int64_t r = begin; r < end; ++r) {
      const float* row = logits + r * vocab;
      float max_logit = row[0];
      for (int64_t c = 1; c < vocab; ++c) max_logit = std::max(max_logit, row[c]);
      const double sum = ExpShifted(row, max_logit, 1.0f, vocab, nullptr);
      const double row_lse = max_logit + std::log(sum);
      lse[r] = static_cast<float>(row_lse);
      if (targets[r] != kIgnoreIndex) total += row_lse - row[targets[r]];
    }
    partial[static_cast<size_t>(thread)] = total;
  });
  double total = 0.0;
  for (double p : partial) total += p;
  *loss_sum = total;
}

void FastOps::CrossEntropyBackward(const float* logits, const int32_t* targets, const float* lse,
                                   int64_t n, int64_t vocab, float scale, float* dlogits) const {
  pool_->ParallelFor(n, MinRows(vocab), [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = logits + r * vocab;
      float* drow = dlogits + r * vocab;
      if (targets[r] == kIgnoreIndex) {
        std::fill(drow, drow + vocab, 0.0f);
        continue;
      }
      const float row_lse = lse[r];
      ExpShifted(row, row_lse, scale, vocab, drow);
      drow[targets[r]] -= scale;
    }
  });
}

}  // namespace air::engine
