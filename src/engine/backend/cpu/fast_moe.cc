// FastOps' mixture-of-experts ops (GPT-OSS; see ops.h and fast_ops.h): the clamped SwiGLU in
// row chunks, the router's top-k per token, and gather / combine per row or token over the
// thread pool — every task writes only its own rows, so results do not depend on the thread
// count. The dispatch (a counting sort of N*k small integers) runs on the calling thread, as the
// reference's loop. BF16 rows are widened into per-thread fp32 scratch and rounded back once.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "engine/backend/cpu/convert.h"
#include "engine/backend/cpu/fast_ops.h"
#include "engine/backend/cpu/reference_loops.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/ops/op_sizes.h"

namespace air::engine {

namespace {

int64_t MinRows(int64_t dim) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, dim)); }
inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

// Rows of I outputs (2I inputs) per task; fp32 math, sigmoid in fp32.
void FastOps::ClampedSwigluForwardKernel(const View& gate_up, float alpha, float limit,
                                         const View& out) const {
  const int64_t cols = out.shape().empty() ? out.numel() : out.dim(-1);
  const int64_t rows = cols > 0 ? out.numel() / cols : 0;
  pool_->ParallelFor(rows, MinRows(2 * cols), [&](int64_t begin, int64_t end, int thread) {
    for (int64_t r = begin; r < end; ++r) {
      const float* gu = ReadF32(gate_up, 2 * r * cols, 2 * cols, Scratch(thread, 0, 2 * cols));
      float* o = WriteF32(out, r * cols, Scratch(thread, 1, cols));
      for (int64_t i = 0; i < cols; ++i) {
        const float g = std::min(gu[2 * i], limit);
        const float u = std::clamp(gu[2 * i + 1], -limit, limit);
        o[i] = (u + 1.0f) * (g * Sigmoid(alpha * g));
      }
      CommitF32(o, out, r * cols, cols);
    }
  });
}

void FastOps::ClampedSwigluBackwardKernel(const View& gate_up, float alpha, float limit,
                                          const View& dout, const View& dgate_up) const {
  const int64_t cols = dout.shape().empty() ? dout.numel() : dout.dim(-1);
  const int64_t rows = cols > 0 ? dout.numel() / cols : 0;
  pool_->ParallelFor(rows, MinRows(2 * cols), [&](int64_t begin, int64_t end, int thread) {
    for (int64_t r = begin; r < end; ++r) {
      const float* gu = ReadF32(gate_up, 2 * r * cols, 2 * cols, Scratch(thread, 0, 2 * cols));
      const float* d = ReadF32(dout, r * cols, cols, Scratch(thread, 1, cols));
      float* dg = WriteF32(dgate_up, 2 * r * cols, Scratch(thread, 2, 2 * cols));
      if (dgate_up.dtype() != DType::kF32) LoadF32(dgate_up, 2 * r * cols, 2 * cols, dg);
      for (int64_t i = 0; i < cols; ++i) {
        const float gate = gu[2 * i], up = gu[2 * i + 1];
        const float g = std::min(gate, limit);
        const float u = std::clamp(up, -limit, limit);
        const float sig = Sigmoid(alpha * g);
        if (gate <= limit) dg[2 * i] += d[i] * (u + 1.0f) * (sig + alpha * g * sig * (1.0f - sig));
        if (up >= -limit && up <= limit) dg[2 * i + 1] += d[i] * g * sig;
      }
      CommitF32(dg, dgate_up, 2 * r * cols, 2 * cols);
    }
  });
}

// Per token: a partial sort of the expert ids by logit (ties: lower id first), then the
// softmax over the k chosen logits in fp32 with a double sum.
void FastOps::RouterTopKKernel(const View& logits, const View& indices, const View& weights) const {
  const int64_t k = TopK(indices), n = indices.numel() / k;
  const int64_t experts = n > 0 ? logits.numel() / n : 0;
  pool_->ParallelFor(n, MinRows(experts * 8), [&](int64_t begin, int64_t end, int thread) {
    std::vector<int32_t> order(static_cast<size_t>(experts));
    for (int64_t t = begin; t < end; ++t) {
      const float* row = ReadF32(logits, t * experts, experts, Scratch(thread, 0, experts));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int32_t a, int32_t b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      });
      const float top = row[order[0]];
      double denom = 0.0;
      for (int64_t j = 0; j < k; ++j) denom += std::exp(static_cast<double>(row[order[j]]) - top);
      for (int64_t j = 0; j < k; ++j) {
        indices.i32()[t * k + j] = order[j];
        weights.f32()[t * k + j] =
            static_cast<float>(std::exp(static_cast<double>(row[order[j]]) - top) / denom);
      }
    }
  });
}

void FastOps::RouterTopKBackwardKernel(const View& indices, const View& weights,
                                       const View& dweights, const View& dlogits) const {
  const int64_t k = TopK(indices), n = indices.numel() / k;
  const int64_t experts = n > 0 ? dlogits.numel() / n : 0;
  pool_->ParallelFor(n, MinRows(experts), [&](int64_t begin, int64_t end, int thread) {
    for (int64_t t = begin; t < end; ++t) {
      float* d = WriteF32(dlogits, t * experts, Scratch(thread, 0, experts));
      if (dlogits.dtype() != DType::kF32) LoadF32(dlogits, t * experts, experts, d);
      const float* w = weights.f32() + t * k;
      const float* dw = dweights.f32() + t * k;
      double dot = 0.0;
      for (int64_t j = 0; j < k; ++j) dot += static_cast<double>(w[j]) * dw[j];
      for (int64_t j = 0; j < k; ++j) {
        d[indices.i32()[t * k + j]] += static_cast<float>(w[j] * (dw[j] - dot));
      }
      CommitF32(d, dlogits, t * experts, experts);
    }
  });
}

void FastOps::MoeDispatchKernel(const View& indices, const View& offsets, const View& token_of_row,
                                const View& row_of_slot) const {
  CpuMoeDispatch(indices, offsets, token_of_row, row_of_slot);
}

void FastOps::MoeGatherKernel(const View& x, const View& token_of_row, const View& grouped) const {
  const int64_t rows = token_of_row.numel(), dim = rows > 0 ? grouped.numel() / rows : 0;
  const bool same = x.dtype() == grouped.dtype();
  const size_t row_bytes = static_cast<size_t>(dim) * DTypeSize(x.dtype());
  pool_->ParallelFor(rows, MinRows(dim), [&](int64_t begin, int64_t end, int thread) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t t = token_of_row.i32()[r];
      if (same) {  // a plain row copy, exact in either dtype
        std::memcpy(static_cast<char*>(grouped.raw()) + r * row_bytes,
                    static_cast<const char*>(x.raw()) + t * row_bytes, row_bytes);
      } else {
        StoreF32(ReadF32(x, t * dim, dim, Scratch(thread, 0, dim)), grouped, r * dim, dim);
      }
    }
  });
}

void FastOps::MoeGatherBackwardKernel(const View& dgrouped, const View& row_of_slot,
                                      const View& dx) const {
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? dx.numel() / n : 0;
  pool_->ParallelFor(n, MinRows(dim * k), [&](int64_t begin, int64_t end, int thread) {
    std::vector<int32_t> order(static_cast<size_t>(k));
    std::vector<double> sum(static_cast<size_t>(dim));
    for (int64_t t = begin; t < end; ++t) {
      const int32_t* rows = row_of_slot.i32() + t * k;
      MoeSlotsByRow(rows, k, order.data());
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int32_t j : order) {
        const float* d = ReadF32(dgrouped, rows[j] * dim, dim, Scratch(thread, 0, dim));
        for (int64_t c = 0; c < dim; ++c) sum[c] += d[c];
      }
      float* out = WriteF32(dx, t * dim, Scratch(thread, 1, dim));
      if (dx.dtype() != DType::kF32) LoadF32(dx, t * dim, dim, out);
      for (int64_t c = 0; c < dim; ++c) out[c] += static_cast<float>(sum[c]);
      CommitF32(out, dx, t * dim, dim);
    }
  });
}

// The reference's order and rounding (each product rounded, summed from zero in row order), so
// F32 results are the reference's bits.
void FastOps::MoeCombineKernel(const View& y, const View& weights, const View& row_of_slot,
                               const View& out) const {
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? out.numel() / n : 0;
  pool_->ParallelFor(n, MinRows(dim * k), [&](int64_t begin, int64_t end, int thread) {
    std::vector<int32_t> order(static_cast<size_t>(k));
    for (int64_t t = begin; t < end; ++t) {
      const int32_t* rows = row_of_slot.i32() + t * k;
      MoeSlotsByRow(rows, k, order.data());
      float* o = WriteF32(out, t * dim, Scratch(thread, 1, dim));
      std::fill(o, o + dim, 0.0f);
      for (int32_t j : order) {
        const float w = weights.f32()[t * k + j];
        const float* yr = ReadF32(y, rows[j] * dim, dim, Scratch(thread, 0, dim));
        for (int64_t c = 0; c < dim; ++c) {
          const float product = yr[c] * w;
          o[c] += product;
        }
      }
      CommitF32(o, out, t * dim, dim);
    }
  });
}

void FastOps::MoeCombineBackwardKernel(const View& y, const View& weights, const View& row_of_slot,
                                       const View& dout, const View& dy,
                                       const View& dweights) const {
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? dout.numel() / n : 0;
  pool_->ParallelFor(n, MinRows(dim * k), [&](int64_t begin, int64_t end, int thread) {
    for (int64_t t = begin; t < end; ++t) {
      const float* d = ReadF32(dout, t * dim, dim, Scratch(thread, 0, dim));
      for (int64_t j = 0; j < k; ++j) {
        const int64_t row = row_of_slot.i32()[t * k + j];
        const float w = weights.f32()[t * k + j];
        const float* yr = ReadF32(y, row * dim, dim, Scratch(thread, 1, dim));
        double dot = 0.0;
        for (int64_t c = 0; c < dim; ++c) dot += static_cast<double>(d[c]) * yr[c];
        dweights.f32()[t * k + j] += static_cast<float>(dot);
        float* g = WriteF32(dy, row * dim, Scratch(thread, 2, dim));
        for (int64_t c = 0; c < dim; ++c) g[c] = w * d[c];
        CommitF32(g, dy, row * dim, dim);
      }
    }
  });
}

}  // namespace air::engine
