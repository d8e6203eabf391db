// FastOps' elementwise, embedding and RoPE ops (see fast_ops.h): contiguous chunks or rows
// spread over the thread pool; computed in fp32 and rounded back to BF16 once — SwiGLU and the
// residual add converting in registers (mixed_rowwise.h) where those kernels run, the others
// (and those at lower kernel levels) widening BF16 data into per-thread fp32 scratch.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "engine/backend/cpu/convert.h"
#include "engine/backend/cpu/dropout_range.h"
#include "engine/backend/cpu/fast_ops.h"
#include "engine/backend/cpu/mixed_rowwise.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/cpu/vec_math.h"

namespace air::engine {
namespace {

constexpr int64_t kChunk = 4096;           // elements staged at a time by the elementwise ops
constexpr int64_t kMinParallel = 1 << 14;  // elements per thread below which one thread does it

// Calls fn(offset, count, thread) over [0, n) in chunks of at most kChunk, spread over the pool.
template <typename Fn>
void ForChunks(ThreadPool& pool, int64_t n, Fn&& fn) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  // Balanced (elementwise: no chunk's result depends on where it runs), in pieces of
  // kMinParallel elements; an array of one piece runs on the calling thread.
  pool.ParallelForBalanced(chunks, kMinParallel / kChunk,
                           [&](int64_t begin, int64_t end, int thread) {
                             for (int64_t c = begin; c < end; ++c) {
                               const int64_t offset = c * kChunk;
                               fn(offset, std::min(kChunk, n - offset), thread);
                             }
                           });
}

int64_t MinRows(int64_t dim) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, dim)); }

}  // namespace

void FastOps::EmbeddingForwardKernel(const View& ids, const View& table, const View& out) const {
  const int64_t n = ids.numel(), dim = table.dim(-1);
  pool_->ParallelForBalanced(n, MinRows(dim), [&](int64_t begin, int64_t end, int thread) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t row = ids.i32()[i];
      const float* src = ReadF32(table, row * dim, dim, Scratch(thread, 0, dim));
      StoreF32(src, out, i * dim, dim);
    }
  });
}

// Two tokens with the same id add into the same row, in token order (the reference's order):
// threads split the columns, not the tokens, so every element still gets its tokens' values
// added one by one in token order — the reference's bits on any thread count. A BF16 table (bf16
// state) has each row the batch touches widened once (the map is built serially: one lookup per
// token), its tokens added in fp32 and rounded once.
void FastOps::EmbeddingBackwardKernel(const View& ids, const View& dout, int32_t skip_id,
                                      const View& dtable) const {
  const int64_t n = ids.numel(), dim = dtable.dim(-1);
  const bool staged = dtable.dtype() != DType::kF32;
  std::unordered_map<int32_t, int64_t> slot_of;  // staged: a touched row's place in `rows`
  std::vector<int32_t> touched;
  std::vector<int64_t> slot(static_cast<size_t>(staged ? n : 0), -1);  // staged: token -> row
  std::vector<float> rows;
  if (staged) {
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id = ids.i32()[i];
      if (id == skip_id) continue;
      auto [at, added] = slot_of.emplace(id, static_cast<int64_t>(touched.size()));
      if (added) touched.push_back(id);
      slot[static_cast<size_t>(i)] = at->second;
    }
    rows.resize(touched.size() * static_cast<size_t>(dim));
  }
  const auto touched_rows = static_cast<int64_t>(touched.size());
  // Whole cache lines of fp32 columns per piece (no two threads write one line), at least
  // ~16k additions each.
  constexpr int64_t kColumns = 16;
  const int64_t pieces = (dim + kColumns - 1) / kColumns;
  const int64_t grain = std::max<int64_t>(1, kMinParallel / std::max<int64_t>(1, n * kColumns));
  pool_->ParallelForBalanced(pieces, grain, [&](int64_t begin, int64_t end, int thread) {
    const int64_t c0 = begin * kColumns, width = std::min(dim, end * kColumns) - c0;
    for (int64_t t = 0; t < touched_rows; ++t) {  // staged: this piece of every touched row
      LoadF32(dtable, static_cast<int64_t>(touched[static_cast<size_t>(t)]) * dim + c0, width,
              rows.data() + t * dim + c0);
    }
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id = ids.i32()[i];
      if (id == skip_id) continue;
      const float* d = ReadF32(dout, i * dim + c0, width, Scratch(thread, 0, width));
      float* row = staged ? rows.data() + slot[static_cast<size_t>(i)] * dim + c0
                          : dtable.f32() + static_cast<int64_t>(id) * dim + c0;
      for (int64_t c = 0; c < width; ++c) row[c] += d[c];
    }
    for (int64_t t = 0; t < touched_rows; ++t) {
      StoreF32(rows.data() + t * dim + c0, dtable,
               static_cast<int64_t>(touched[static_cast<size_t>(t)]) * dim + c0, width);
    }
  });
}

void FastOps::RopeTablesKernel(const View& positions, const View& inv_freq, float scale,
                               const View& cos, const View& sin) const {
  const int64_t n = positions.numel(), half = inv_freq.numel();
  pool_->ParallelForBalanced(n, MinRows(half * 16), [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t i = 0; i < half; ++i) {
        RopeAngle(positions.i32()[t], inv_freq.f32()[i], scale, &cos.f32()[t * half + i],
                  &sin.f32()[t * half + i]);
      }
    }
  });
}

namespace {

// Rotates every head of one token's row (H * D values) by that token's angles; `inverse`
// applies the transpose (the backward).
void RotateRow(float* v, int64_t heads, int64_t half, const float* c, const float* s,
               bool inverse) {
  const float sign = inverse ? -1.0f : 1.0f;
  for (int64_t h = 0; h < heads; ++h, v += 2 * half) {
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = v[i], x2 = v[i + half], si = sign * s[i];
      v[i] = x1 * c[i] - x2 * si;
      v[i + half] = x2 * c[i] + x1 * si;
    }
  }
}

}  // namespace

void FastOps::RopeForwardKernel(const View& x, const View& cos, const View& sin) const {
  const int64_t n = cos.dim(0), half = cos.dim(-1);
  const int64_t row = n > 0 ? x.numel() / n : 0, heads = half > 0 ? row / (2 * half) : 0;
  pool_->ParallelForBalanced(n, MinRows(row), [&](int64_t begin, int64_t end, int thread) {
    for (int64_t t = begin; t < end; ++t) {
      float* v = WriteF32(x, t * row, Scratch(thread, 0, row));
      if (x.dtype() != DType::kF32) LoadF32(x, t * row, row, v);
      RotateRow(v, heads, half, cos.f32() + t * half, sin.f32() + t * half, false);
      CommitF32(v, x, t * row, row);
    }
  });
}

void FastOps::RopeBackwardKernel(const View& dx, const View& cos, const View& sin) const {
  const int64_t n = cos.dim(0), half = cos.dim(-1);
  const int64_t row = n > 0 ? dx.numel() / n : 0, heads = half > 0 ? row / (2 * half) : 0;
  pool_->ParallelForBalanced(n, MinRows(row), [&](int64_t begin, int64_t end, int thread) {
    for (int64_t t = begin; t < end; ++t) {
      float* v = WriteF32(dx, t * row, Scratch(thread, 0, row));
      if (dx.dtype() != DType::kF32) LoadF32(dx, t * row, row, v);
      RotateRow(v, heads, half, cos.f32() + t * half, sin.f32() + t * half, true);
      CommitF32(v, dx, t * row, row);
    }
  });
}

void FastOps::SwigluForwardKernel(const View& gate, const View& up, const View& out) const {
  if (MixedRowwiseRuns()) {  // bf16 converted in registers
    ForChunks(*pool_, gate.numel(), [&](int64_t at, int64_t count, int) {
      SwigluForwardMixed(MixedAt(gate, at), MixedAt(up, at), count, MixedAt(out, at));
    });
    return;
  }
  ForChunks(*pool_, gate.numel(), [&](int64_t at, int64_t count, int thread) {
    const float* g = ReadF32(gate, at, count, Scratch(thread, 0, count));
    const float* u = ReadF32(up, at, count, Scratch(thread, 1, count));
    float* o = WriteF32(out, at, Scratch(thread, 2, count));
    SwigluForwardRange(g, u, count, o);
    CommitF32(o, out, at, count);
  });
}

void FastOps::SwigluBackwardKernel(const View& gate, const View& up, const View& dout,
                                   const View& dgate, const View& dup) const {
  const bool staged = gate.dtype() != DType::kF32 || up.dtype() != DType::kF32 ||
                      dout.dtype() != DType::kF32 || dgate.dtype() != DType::kF32 ||
                      dup.dtype() != DType::kF32;
  if (MixedRowwiseRuns()) {  // bf16 converted in registers
    ForChunks(*pool_, gate.numel(), [&](int64_t at, int64_t count, int) {
      SwigluBackwardMixed(MixedAt(gate, at), MixedAt(up, at), MixedAt(dout, at), count,
                          MixedAt(dgate, at), MixedAt(dup, at));
    });
    return;
  }
  if (!staged) {
    ForChunks(*pool_, gate.numel(), [&](int64_t at, int64_t count, int) {
      SwigluBackwardRange(gate.f32() + at, up.f32() + at, dout.f32() + at, count, dgate.f32() + at,
                          dup.f32() + at);
    });
    return;
  }
  // Five arrays and three scratch slots per thread: stage in two halves of a chunk's slots.
  ForChunks(*pool_, gate.numel(), [&](int64_t at, int64_t count, int thread) {
    float* in = Scratch(thread, 0, 3 * count);
    float* out = Scratch(thread, 1, 2 * count);
    LoadF32(gate, at, count, in);
    LoadF32(up, at, count, in + count);
    LoadF32(dout, at, count, in + 2 * count);
    LoadF32(dgate, at, count, out);
    LoadF32(dup, at, count, out + count);
    SwigluBackwardRange(in, in + count, in + 2 * count, count, out, out + count);
    StoreF32(out, dgate, at, count);
    StoreF32(out + count, dup, at, count);
  });
}

void FastOps::AddInPlaceKernel(const View& y, const View& x) const {
  if (MixedRowwiseRuns()) {  // bf16 converted in registers
    ForChunks(*pool_, y.numel(), [&](int64_t at, int64_t count, int) {
      AddMixed(MixedAt(y, at), MixedAt(x, at), count);
    });
    return;
  }
  ForChunks(*pool_, y.numel(), [&](int64_t at, int64_t count, int thread) {
    const float* xs = ReadF32(x, at, count, Scratch(thread, 0, count));
    float* ys = WriteF32(y, at, Scratch(thread, 1, count));
    if (y.dtype() != DType::kF32) LoadF32(y, at, count, ys);
    for (int64_t i = 0; i < count; ++i) ys[i] += xs[i];
    CommitF32(ys, y, at, count);
  });
}

void FastOps::DropoutKernel(const View& x, float p, uint64_t seed, const View& out) const {
  const float scale = 1.0f / (1.0f - p);
  ForChunks(*pool_, x.numel(), [&](int64_t at, int64_t count, int thread) {
    const float* xs = ReadF32(x, at, count, Scratch(thread, 0, count));
    float* ys = WriteF32(out, at, Scratch(thread, 1, count));
    DropoutRange(xs, p, scale, seed, static_cast<uint64_t>(at), count, ys);
    CommitF32(ys, out, at, count);
  });
}

void FastOps::DropoutMaskKernel(int64_t n, float p, uint64_t seed, const View& bits) const {
  static_assert(kChunk % 8 == 0, "a chunk's mask starts on a byte");
  uint8_t* mask = static_cast<uint8_t*>(bits.raw());
  ForChunks(*pool_, n, [&](int64_t at, int64_t count, int) {
    DropoutMaskRange(p, seed, static_cast<uint64_t>(at), count, mask + at / 8);
  });
}

void FastOps::ApplyDropoutMaskKernel(const View& x, const View& bits, float p, float beta,
                                     const View& out) const {
  const float scale = 1.0f / (1.0f - p);
  const uint8_t* mask = static_cast<const uint8_t*>(bits.raw());
  if (beta == 0.0f && x.dtype() == DType::kBF16 && out.dtype() == DType::kBF16) {
    // LoRA's dropped input: bf16 to bf16 in registers, no fp32 staging.
    ForChunks(*pool_, x.numel(), [&](int64_t at, int64_t count, int) {
      ApplyDropoutMaskRangeBf16(x.bf16() + at, mask + at / 8, scale, count, out.bf16() + at);
    });
    return;
  }
  ForChunks(*pool_, x.numel(), [&](int64_t at, int64_t count, int thread) {
    const float* xs = ReadF32(x, at, count, Scratch(thread, 0, count));
    float* ys = WriteF32(out, at, Scratch(thread, 1, count));
    if (beta != 0.0f && out.dtype() != DType::kF32) LoadF32(out, at, count, ys);
    ApplyDropoutMaskRange(xs, mask + at / 8, scale, beta != 0.0f, count, ys);
    CommitF32(ys, out, at, count);
  });
}

void FastOps::AddBiasKernel(const View& y, const View& bias) const {
  const int64_t cols = bias.numel(), rows = cols > 0 ? y.numel() / cols : 0;
  const float* b = WeightF32(bias);
  pool_->ParallelForBalanced(rows, MinRows(cols), [&](int64_t begin, int64_t end, int thread) {
    for (int64_t r = begin; r < end; ++r) {
      float* ys = WriteF32(y, r * cols, Scratch(thread, 0, cols));
      if (y.dtype() != DType::kF32) LoadF32(y, r * cols, cols, ys);
      for (int64_t c = 0; c < cols; ++c) ys[c] += b[c];
      CommitF32(ys, y, r * cols, cols);
    }
  });
}

// dbias (C) += column sums of dy (N, C): per-thread partial sums in double over row ranges,
// added in thread order (deterministic).
void FastOps::BiasBackwardKernel(const View& dy, const View& dbias) const {
  const int64_t cols = dbias.numel(), rows = cols > 0 ? dy.numel() / cols : 0;
  const int64_t min_rows = MinRows(cols);
  const int64_t chunks =
      std::min<int64_t>(pool_->num_threads(), std::max<int64_t>(1, rows / min_rows));
  for (int64_t t = 0; t < chunks; ++t) {
    row_scratch_[static_cast<size_t>(t)].assign(static_cast<size_t>(cols), 0.0);
  }
  pool_->ParallelFor(rows, min_rows, [&](int64_t begin, int64_t end, int thread) {
    double* sums = row_scratch_[static_cast<size_t>(thread)].data();
    for (int64_t r = begin; r < end; ++r) {
      const float* d = ReadF32(dy, r * cols, cols, Scratch(thread, 0, cols));
      for (int64_t c = 0; c < cols; ++c) sums[c] += d[c];
    }
  });
  std::vector<float> sums(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    double sum = 0.0;
    for (int64_t t = 0; t < chunks; ++t) sum += row_scratch_[static_cast<size_t>(t)][c];
    sums[static_cast<size_t>(c)] = static_cast<float>(sum);
  }
  AccumulateF32(sums.data(), dbias, 0, cols);
}

void FastOps::ConvertKernel(const View& src, const View& dst) const {
  if (src.dtype() == dst.dtype()) {
    Copy(dst, src);
    return;
  }
  ForChunks(*pool_, src.numel(), [&](int64_t at, int64_t count, int thread) {
    if (dst.dtype() == DType::kF32) {  // widened straight into dst
      LoadF32(src, at, count, dst.f32() + at);
    } else {
      StoreF32(ReadF32(src, at, count, Scratch(thread, 0, count)), dst, at, count);
    }
  });
}

}  // namespace air::engine
