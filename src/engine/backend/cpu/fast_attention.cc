// FastOps attention: the reference math (reference_loops.cc) reorganized into tiles so the heavy
// parts are GEMMs. For one batch row b and query head h, a block of up to QueryBlock() queries
// [i0, i1) can see only keys [lo, hi) (causal bound and sliding window), so
//   S = scale * Q[i0:i1] @ K[lo:hi]^T, masked;  P = softmax(S);  O[i0:i1] = P @ V[lo:hi]
// and the backward recomputes P from the saved log-sum-exp:
//   dP = dO @ V^T;  dS = P * (dP - rowsum(dO * O)) * scale
//   dQ += dS @ K;  dK += dS^T @ Q;  dV += P^T @ dO
// Forward tasks are (b, h, query block); backward tasks are (b, kv head) so that each task owns
// the dK/dV rows it writes (no races, deterministic) — or, when there are fewer such pairs than
// half the threads, two passes: dK/dV per (b, kv head, block of keys), then dQ per (b, h, query
// block), recomputing P and dS (each output gets the same products in the same order). The tiles
// read q, k, v, out, dout in their own dtype and write out, dq, dk, dv in theirs: a product with a
// BF16 operand is gemm_mixed.h's bf16 GEMM with fp32 sums (P and dS, fp32 scratch, rounded to bf16
// as its other operand), an all-F32 one fast_gemm's; scores, softmax and log-sum-exp are fp32.
// The bf16 products take FastOps::native_bf16_path (the conversion path where gemm_path.h
// chose one for the CPU). On the avx512bf16 path the bf16 products are attention_gemm.h's: the same
// kernel and sums, but banded by the causal and window limits (no micro-tile past the diagonal), on
// 128-query tiles; and when q, k and v (and the backward's dO) are BF16 there, the forward's block
// and the backward's P and dS go through attention_tile.h's fused tiles instead: the same bits,
// without the fp32 scratch of scores. Sinks (GPT-OSS) join each row's max and denominator in the
// forward; the backward's P comes from the lse, which includes them, and their gradient -sum_i
// exp(sink - lse_i) (dO_i . O_i) is a separate pass per head (SinkGradients) so that no two tasks
// write the same dsink.
#include <immintrin.h>

// GCC 12 reports the deliberately undefined pass-through operand inside the unmasked AVX-512
// shift and convert intrinsics as uninitialized (a false positive; as in vec_math.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/backend/cpu/attention_gemm.h"
#include "engine/backend/cpu/attention_masks.h"
#include "engine/backend/cpu/attention_tile.h"
#include "engine/backend/cpu/bf16_simd.h"
#include "engine/backend/cpu/convert.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/fast_ops.h"
#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/cpu/vec_math.h"
#include "engine/dtype.h"

namespace air::engine {

namespace {

// Queries per tile (and keys per block of the backward's split). The banded avx512bf16 and
// avx512 products (attention_gemm.h: bf16 inputs) skip the tiles past the diagonal, so larger
// blocks cost them no masked work and give dK and dV deeper products (K = the block's queries);
// the other paths, and fp32 inputs on any path, compute whole rectangles and keep the smaller
// block.
int64_t QueryBlock(GemmBf16Path path, const View& q) {
  return AttentionGemmRuns(path) && q.dtype() == DType::kBF16 ? 128 : 64;
}
constexpr float kNegInf = kAttentionNegInf;

// A matrix inside one of the op's views: its first element, dtype and row stride.
struct Mat {
  const void* data;
  bool bf16;
  int64_t ld;
};

Mat At(const View& v, int64_t offset, int64_t ld) {
  if (v.dtype() == DType::kBF16) return {v.bf16() + offset, true, ld};
  return {v.f32() + offset, false, ld};
}

Mat Scratch32(const float* data, int64_t ld) { return {data, false, ld}; }

// Element i of a row, as fp32.
float Elem(const Mat& m, int64_t i) {
  return m.bf16 ? WidenBf16(static_cast<const uint16_t*>(m.data)[i])
                : static_cast<const float*>(m.data)[i];
}

// One product inside a task: C (m, n) = op(A) @ op(B) + beta * C. Per-task scratch. `band`
// says which entries the causal and window limits leave nonzero (attention_gemm.h): the
// avx512bf16 and avx512 products skip the rest, the others compute the whole rectangle.
struct TaskGemm {
  GemmBf16Path path;  // FastOps::native_bf16_path
  GemmScratch& floats;
  GemmBf16Scratch& mixed;
  std::vector<float>& staging;  // an fp32 C for the rare F32 x F32 -> BF16 product

  void operator()(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const Mat& a, const Mat& b,
                  float beta, const Mat& c, const AttentionBand& band = {}) {
    void* c_data = const_cast<void*>(c.data);
    if ((a.bf16 || b.bf16) && AttentionGemmRuns(path) && m > 0 && n > 0 && k > 0) {
      AttentionGemmBf16(path, mixed, m, n, k, {a.data, a.bf16, a.ld, ta},
                        {b.data, b.bf16, b.ld, tb}, beta, {c_data, c.bf16, c.ld}, band);
      return;
    }
    if (a.bf16 || b.bf16) {
      GemmBf16OnPath(path, nullptr, mixed, m, n, k, {a.data, a.bf16, a.ld, ta},
                     {b.data, b.bf16, b.ld, tb}, beta, {c_data, c.bf16, c.ld});
      return;
    }
    const auto* af = static_cast<const float*>(a.data);
    const auto* bf = static_cast<const float*>(b.data);
    if (!c.bf16) {
      FastGemmSerial(floats, ta, tb, m, n, k, af, a.ld, bf, b.ld, beta, static_cast<float*>(c_data),
                     c.ld);
      return;
    }
    staging.assign(static_cast<size_t>(m * n), 0.0f);
    auto* out = static_cast<uint16_t*>(c_data);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) staging[i * n + j] = Bf16ToF32(out[i * c.ld + j]);
    }
    FastGemmSerial(floats, ta, tb, m, n, k, af, a.ld, bf, b.ld, beta, staging.data(), n);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) out[i * c.ld + j] = F32ToBf16(staging[i * n + j]);
    }
  }
};

// The band of a tile of queries from i0 against keys from lo, rows the queries: key j (relative
// to lo) is visible to query i only for i + lo' <= j <= i + hi' (causal; window). On columns
// for Q K^T and dO V^T, on K steps for P V and dS K.
AttentionBand QueryBand(const AttentionShape& s, int64_t i0, int64_t lo, bool on_columns) {
  AttentionBand band;
  band.hi = s.q_offset + i0 - lo;
  if (s.sliding_window > 0) band.lo = band.hi - s.sliding_window + 1;
  band.on_columns = on_columns;
  return band;
}

// The same tile's band with the keys as rows and the queries as K steps (dS^T Q, P^T dO):
// query i sees key j only for j + lo - q_offset - i0 <= i (and within the window).
AttentionBand KeyBand(const AttentionShape& s, int64_t i0, int64_t lo) {
  AttentionBand band;
  band.lo = lo - s.q_offset - i0;
  if (s.sliding_window > 0) band.hi = band.lo + s.sliding_window - 1;
  band.on_columns = false;
  return band;
}

// 16 elements of a row from `at` (those outside the mask: zeros), as fp32. AVX-512F only (a
// bf16 row's ragged end goes through a copy: a masked 16-bit load needs AVX512BW).
__attribute__((target("avx512f"), always_inline)) inline __m512 Load16F32(const Mat& m, int64_t at,
                                                                          __mmask16 k) {
  if (!m.bf16) return _mm512_maskz_loadu_ps(k, static_cast<const float*>(m.data) + at);
  const uint16_t* src = static_cast<const uint16_t*>(m.data) + at;
  uint16_t tail[16] = {};
  if (k != 0xffff) {
    for (int i = 0; i < 16; ++i) tail[i] = (k >> i) & 1 ? src[i] : uint16_t{0};
    src = tail;
  }
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  return WidenBf16x16(_mm512_cvtepu16_epi32(bits));
}

__attribute__((target("avx512f"))) double RowDotAvx512(const Mat& a, const Mat& b, int64_t n) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = TailMask(n - i);
    const __m512 product = _mm512_mul_ps(Load16F32(a, i, k), Load16F32(b, i, k));
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(product)));
    hi = _mm512_add_pd(
        hi,
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(product), 1))));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}

// The sum over i < n of a[i] * b[i], each product rounded to float, summed in double: the
// backward's delta = dO_r . O_r (in 16 double lanes with AVX-512, else in order).
double RowDot(const Mat& a, const Mat& b, int64_t n) {
  if (UseAvx512()) return RowDotAvx512(a, b, n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += Elem(a, i) * Elem(b, i);
  return sum;
}

__attribute__((target("avx512f"))) void DsRowAvx512(const float* p, float* dp, int64_t n,
                                                    float delta, float scale, uint16_t* p16,
                                                    uint16_t* ds16, bool keep_f32) {
  const __m512 vdelta = _mm512_set1_ps(delta), vscale = _mm512_set1_ps(scale);
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 k = TailMask(n - c);
    const __m512 pv = _mm512_maskz_loadu_ps(k, p + c);
    const __m512 dpv = _mm512_maskz_loadu_ps(k, dp + c);
    const __m512 ds = _mm512_mul_ps(_mm512_mul_ps(pv, _mm512_sub_ps(dpv, vdelta)), vscale);
    if (keep_f32) _mm512_mask_storeu_ps(dp + c, k, ds);
    if (p16 != nullptr) _mm512_mask_cvtepi32_storeu_epi16(p16 + c, k, RoundToBf16x16(pv));
    if (ds16 != nullptr) _mm512_mask_cvtepi32_storeu_epi16(ds16 + c, k, RoundToBf16x16(ds));
  }
}

// One row of dS = P * (dP - delta) * scale, written over dP (the products in that order), and
// the bf16 roundings of P and dS into p16 and ds16 (null: not wanted): one pass with AVX-512,
// which leaves dP as it was when !keep_f32 (no product reads the fp32 dS then). Only the
// visible run [c0, c1) is computed: outside it P is 0, and so are dS, P16 and dS16.
void DsRow(const float* p, float* dp, int64_t n, int64_t c0, int64_t c1, float delta, float scale,
           uint16_t* p16, uint16_t* ds16, bool keep_f32) {
  const bool avx512 = UseAvx512();
  if (keep_f32 || !avx512) {
    std::fill(dp, dp + c0, 0.0f);
    std::fill(dp + c1, dp + n, 0.0f);
  }
  for (uint16_t* bits : {p16, ds16}) {
    if (bits == nullptr) continue;
    std::fill(bits, bits + c0, uint16_t{0});
    std::fill(bits + c1, bits + n, uint16_t{0});
  }
  p += c0;
  dp += c0;
  if (p16 != nullptr) p16 += c0;
  if (ds16 != nullptr) ds16 += c0;
  n = c1 - c0;
  if (avx512) return DsRowAvx512(p, dp, n, delta, scale, p16, ds16, keep_f32);
  for (int64_t c = 0; c < n; ++c) dp[c] = p[c] * (dp[c] - delta) * scale;
  if (p16 != nullptr) RoundToBf16(p, p16, n);
  if (ds16 != nullptr) RoundToBf16(dp, ds16, n);
}

__attribute__((target("avx512f"))) void ScaleToBf16Avx512(const float* x, float scale, int64_t n,
                                                          uint16_t* out) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 k = TailMask(n - c);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + c), vscale);
    _mm512_mask_cvtepi32_storeu_epi16(out + c, k, RoundToBf16x16(v));
  }
}

// out[c] = bf16(x[c] * scale), c < n: the forward's P rounded for P @ V in one pass.
void ScaleToBf16(const float* x, float scale, int64_t n, uint16_t* out) {
  if (UseAvx512()) return ScaleToBf16Avx512(x, scale, n, out);
  for (int64_t c = 0; c < n; ++c) out[c] = RoundToBf16(x[c] * scale);
}

// The fused tiles' block (attention_tile.h): queries [i0, i0 + nq) of head h of row b against
// keys [lo, lo + nk), q, k and v BF16.
AttentionTileBlock FusedBlock(const AttentionShape& s, const View& q, const View& k, const View& v,
                              const int32_t* q_segments, const int32_t* kv_segments, int64_t b,
                              int64_t h, int64_t i0, int64_t nq, int64_t lo, int64_t nk) {
  const int64_t q_stride = s.q_heads * s.head_dim, kv_stride = s.kv_heads * s.head_dim;
  const int64_t q_off = (b * s.q_len + i0) * q_stride + h * s.head_dim;
  const int64_t kv_off =
      (b * s.kv_rows() + lo) * kv_stride + h / (s.q_heads / s.kv_heads) * s.head_dim;
  return {.shape = &s,
          .b = b,
          .i0 = i0,
          .nq = nq,
          .lo = lo,
          .nk = nk,
          .q_segments = q_segments,
          .kv_segments = kv_segments,
          .q = q.bf16() + q_off,
          .q_ld = q_stride,
          .k = k.bf16() + kv_off,
          .v = v.bf16() + kv_off,
          .kv_ld = kv_stride};
}

// The sinks of a call as fp32 (empty when the view is).
std::vector<float> SinkValues(const View& sinks) {
  std::vector<float> values(static_cast<size_t>(sinks.numel()));
  const Mat m = sinks.empty() ? Mat{nullptr, false, 0} : At(sinks, 0, 0);
  for (size_t h = 0; h < values.size(); ++h) values[h] = Elem(m, static_cast<int64_t>(h));
  return values;
}

// dsinks[h] += -sum over rows b and queries i of exp(sink_h - lse) * (dO . O), per head in
// double, heads spread over the pool (rows that saw nothing, lse = -inf, have no sink and add
// nothing).
void SinkGradients(ThreadPool& pool, const AttentionShape& s, const std::vector<float>& sinks,
                   const View& out, const View& dout, const float* lse, const View& dsinks_view) {
  std::vector<float> dsinks(static_cast<size_t>(s.q_heads), 0.0f);
  const int64_t q_stride = s.q_heads * s.head_dim;
  // Heads over threads: each head's sum in its own order (the same bits on any thread count).
  pool.ParallelFor(s.q_heads, 1, [&](int64_t first, int64_t last, int) {
    for (int64_t h = first; h < last; ++h) {
      double sum = 0.0;
      for (int64_t b = 0; b < s.batch; ++b) {
        for (int64_t i = 0; i < s.q_len; ++i) {
          const float l = lse[(b * s.q_heads + h) * s.q_len + i];
          if (l == kNegInf) continue;
          const int64_t off = (b * s.q_len + i) * q_stride + h * s.head_dim;
          const Mat o = At(out, off, 0), d_o = At(dout, off, 0);
          double delta = 0.0;
          for (int64_t d = 0; d < s.head_dim; ++d) delta += Elem(d_o, d) * Elem(o, d);
          sum += std::exp(static_cast<double>(sinks[static_cast<size_t>(h)]) - l) * delta;
        }
      }
      dsinks[static_cast<size_t>(h)] = -static_cast<float>(sum);
    }
  });
  AccumulateF32(dsinks.data(), dsinks_view, 0, s.q_heads);
}

}  // namespace

void FastOps::AttentionForwardKernel(const AttentionShape& s, const View& q, const View& k,
                                     const View& v, const View& sinks_view, const View& q_seg,
                                     const View& kv_seg, const View& out,
                                     const View& lse_view) const {
  const std::vector<float> sinks = SinkValues(sinks_view);
  const int64_t q_block = QueryBlock(native_bf16_path(), q);
  const int64_t q_blocks = (s.q_len + q_block - 1) / q_block;
  const int64_t tasks = s.batch * s.q_heads * q_blocks;
  const int64_t group = s.q_heads / s.kv_heads;
  const int64_t q_stride = s.q_heads * s.head_dim, kv_stride = s.kv_heads * s.head_dim;
  float* lse = lse_view.empty() ? nullptr : lse_view.f32();
  const int32_t* q_segments = q_seg.empty() ? nullptr : q_seg.i32();
  const int32_t* kv_segments = kv_seg.empty() ? nullptr : kv_seg.i32();
  const size_t out_size = DTypeSize(out.dtype());
  const bool fused = AttentionTileRuns(native_bf16_path()) && q.dtype() == DType::kBF16 &&
                     k.dtype() == DType::kBF16 && v.dtype() == DType::kBF16;
  pool_->ParallelForBalanced(tasks, 1, [&](int64_t begin, int64_t end, int thread) {
    auto& scores_buf = attention_scratch_[static_cast<size_t>(thread)];
    auto& bf16_buf = attention_bf16_[static_cast<size_t>(thread)];
    TaskGemm gemm{native_bf16_path(), gemm_serial_scratch_[static_cast<size_t>(thread)],
                  gemm_bf16_serial_scratch_[static_cast<size_t>(thread)],
                  attention_staging_[static_cast<size_t>(thread)]};
    for (int64_t t = begin; t < end; ++t) {
      const int64_t blk = t % q_blocks, h = (t / q_blocks) % s.q_heads;
      const int64_t b = t / (q_blocks * s.q_heads);
      const int64_t i0 = blk * q_block, i1 = std::min(s.q_len, i0 + q_block);
      const int64_t nq = i1 - i0;
      int64_t lo, hi;
      KeyRange(s, i0, i1, &lo, &hi);
      const int64_t nk = hi - lo;
      const int64_t q_off = (b * s.q_len + i0) * q_stride + h * s.head_dim;
      const int64_t kv_off = (b * s.kv_rows() + lo) * kv_stride + (h / group) * s.head_dim;
      const Mat qb = At(q, q_off, q_stride), kb = At(k, kv_off, kv_stride);
      const Mat vb = At(v, kv_off, kv_stride), ob = At(out, q_off, q_stride);
      float* lse_b = lse ? lse + (b * s.q_heads + h) * s.q_len + i0 : nullptr;
      const float sink = sinks.empty() ? kNegInf : sinks[static_cast<size_t>(h)];
      auto zero_row = [&](int64_t r) {  // 0.0 is all-zero bits in F32 and BF16
        std::memset(static_cast<char*>(const_cast<void*>(ob.data)) + r * q_stride * out_size, 0,
                    static_cast<size_t>(s.head_dim) * out_size);
      };
      if (nk <= 0) {
        for (int64_t r = 0; r < nq; ++r) {
          zero_row(r);
          if (lse_b) lse_b[r] = sink;  // all weight on the sink, or nothing seen
        }
        continue;
      }
      if (fused) {
        const AttentionTileBlock blk =
            FusedBlock(s, q, k, v, q_segments, kv_segments, b, h, i0, nq, lo, nk);
        AttentionForwardTile(attention_tiles_[static_cast<size_t>(thread)], blk, sink,
                             {const_cast<void*>(ob.data), ob.bf16, q_stride}, lse_b);
        continue;
      }
      if (static_cast<int64_t>(scores_buf.size()) < nq * nk) scores_buf.resize(nq * nk);
      float* scores = scores_buf.data();
      // S (nq, nk) = Q (nq, D) @ K (nk, D)^T
      gemm(false, true, nq, nk, s.head_dim, qb, kb, 0.0f, Scratch32(scores, nk),
           QueryBand(s, i0, lo, true));
      // Segments mask inside the visible run (and scale it); a block in one segment is scaled
      // by the exponentials' pass instead.
      const bool masked = !OneSegment(s, q_segments, kv_segments, b, i0, i1, lo, hi);
      if (masked) MaskAndScale(s, b, i0, nq, lo, nk, q_segments, kv_segments, scores);
      const float x_scale = masked ? 1.0f : s.scale;
      // P @ V with a BF16 V rounds P to bf16: rounded here, row by row while it is in L1, and
      // read in place by the product instead of packed from fp32.
      uint16_t* p16 = nullptr;
      if (vb.bf16) {
        if (static_cast<int64_t>(bf16_buf.size()) < nq * nk) bf16_buf.resize(nq * nk);
        p16 = bf16_buf.data();
      }
      std::vector<bool> empty(static_cast<size_t>(nq), false);
      for (int64_t r = 0; r < nq; ++r) {  // softmax rows in place
        float* row = scores + r * nk;
        // Outside the visible run every score is -inf, its exponential 0: not computed.
        // Rounding is monotonic, so the largest scaled score is the largest raw one scaled.
        int64_t c0, end;
        VisibleRun(s, i0, r, lo, nk, &c0, &end);
        std::fill(row, row + c0, 0.0f);
        std::fill(row + end, row + nk, 0.0f);
        const float raw_max = MaxOf(row + c0, end - c0, kNegInf);
        const float max_score = std::max(sink, raw_max == kNegInf ? kNegInf : x_scale * raw_max);
        if (max_score == kNegInf) {  // nothing visible, no sink: zero output
          std::fill(row, row + nk, 0.0f);
          if (p16) std::fill(p16 + r * nk, p16 + (r + 1) * nk, uint16_t{0});
          if (lse_b) lse_b[r] = kNegInf;
          empty[static_cast<size_t>(r)] = true;
          continue;
        }
        const double denom = ExpOfScaled(row + c0, x_scale, max_score, end - c0, row + c0) +
                             (sink == kNegInf ? 0.0 : std::exp(double{sink} - max_score));
        const float inv = static_cast<float>(1.0 / denom);
        if (p16) {  // only the rounded P is read: bf16(e * inv) straight from the exponentials
          uint16_t* prow = p16 + r * nk;
          std::fill(prow, prow + c0, uint16_t{0});
          ScaleToBf16(row + c0, inv, end - c0, prow + c0);
          std::fill(prow + end, prow + nk, uint16_t{0});
        } else {
          for (int64_t c = c0; c < end; ++c) row[c] *= inv;
        }
        if (lse_b) lse_b[r] = static_cast<float>(max_score + std::log(denom));
      }
      // O (nq, D) = P (nq, nk) @ V (nk, D)
      const Mat pb = p16 ? Mat{p16, true, nk} : Scratch32(scores, nk);
      gemm(false, false, nq, s.head_dim, nk, pb, vb, 0.0f, ob, QueryBand(s, i0, lo, false));
      for (int64_t r = 0; r < nq; ++r) {
        if (empty[static_cast<size_t>(r)]) zero_row(r);
      }
    }
  });
}

void FastOps::AttentionBackwardKernel(const AttentionShape& s, const View& q, const View& k,
                                      const View& v, const View& sinks_view, const View& q_seg,
                                      const View& kv_seg, const View& out, const View& lse_view,
                                      const View& dout, const View& dq, const View& dk,
                                      const View& dv, const View& dsinks_view) const {
  const int64_t group = s.q_heads / s.kv_heads;
  const int64_t q_stride = s.q_heads * s.head_dim, kv_stride = s.kv_heads * s.head_dim;
  const int64_t tasks = s.batch * s.kv_heads;
  const int64_t q_block = QueryBlock(native_bf16_path(), q);
  const float* lse = lse_view.f32();
  const int32_t* q_segments = q_seg.empty() ? nullptr : q_seg.i32();
  const int32_t* kv_segments = kv_seg.empty() ? nullptr : kv_seg.i32();
  const bool fused = AttentionTileRuns(native_bf16_path()) && q.dtype() == DType::kBF16 &&
                     k.dtype() == DType::kBF16 && v.dtype() == DType::kBF16 &&
                     dout.dtype() == DType::kBF16;
  // delta (b, h, i) = dO . O of each query row, in one streaming pass over both before the
  // tiles (which would each read their rows' O from far apart).
  const int64_t query_rows = s.batch * s.q_len;
  attention_deltas_.resize(static_cast<size_t>(query_rows * s.q_heads));
  float* deltas = attention_deltas_.data();
  pool_->ParallelForBalanced(query_rows, 16, [&](int64_t begin, int64_t end, int) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / s.q_len, i = row % s.q_len;
      for (int64_t h = 0; h < s.q_heads; ++h) {
        const int64_t at = row * q_stride + h * s.head_dim;
        const double delta = RowDot(At(dout, at, 0), At(out, at, 0), s.head_dim);
        deltas[(b * s.q_heads + h) * s.q_len + i] = static_cast<float>(delta);
      }
    }
  });
  // One tile: queries [i0, i0 + q_block) of head h of row b against keys [lo, hi). P and dS
  // are recomputed from the lse, then the gradients asked for: dQ += dS K (the tile's rows of dq)
  // and dK += dS^T Q, dV += P^T dO (its keys' rows of dk and dv, the head's KV head).
  const auto tile = [&](int thread, int64_t b, int64_t h, int64_t i0, int64_t lo, int64_t hi,
                        bool want_dq, bool want_dkv) {
    auto& buf = attention_scratch_[static_cast<size_t>(thread)];
    auto& rounded = attention_bf16_[static_cast<size_t>(thread)];
    TaskGemm gemm{native_bf16_path(), gemm_serial_scratch_[static_cast<size_t>(thread)],
                  gemm_bf16_serial_scratch_[static_cast<size_t>(thread)],
                  attention_staging_[static_cast<size_t>(thread)]};
    const int64_t g = h / group;
    const int64_t i1 = std::min(s.q_len, i0 + q_block), nq = i1 - i0;
    const int64_t nk = hi - lo;
    if (nk <= 0) return;
    const int64_t q_off = (b * s.q_len + i0) * q_stride + h * s.head_dim;
    const int64_t kv_off = (b * s.kv_rows() + lo) * kv_stride + g * s.head_dim;
    const Mat qb = At(q, q_off, q_stride), kb = At(k, kv_off, kv_stride);
    const Mat vb = At(v, kv_off, kv_stride), dob = At(dout, q_off, q_stride);
    const float* lse_b = lse + (b * s.q_heads + h) * s.q_len + i0;
    const float* delta = deltas + (b * s.q_heads + h) * s.q_len + i0;
    if (fused) {  // P and dS from the tile's accumulators, in bf16 as the products read them
      AttentionTileScratch& tiles = attention_tiles_[static_cast<size_t>(thread)];
      if (static_cast<int64_t>(rounded.size()) < nq * nk) rounded.resize(nq * nk);
      const size_t words = static_cast<size_t>(AttentionPanelWords(nq, nk));
      if (want_dkv && tiles.probs_t.size() < words) tiles.probs_t.resize(words);
      if (want_dkv && tiles.grads_t.size() < words) tiles.grads_t.resize(words);
      const AttentionGrads grads{want_dq ? rounded.data() : nullptr,
                                 want_dkv ? tiles.grads_t.data() : nullptr,
                                 want_dkv ? tiles.probs_t.data() : nullptr};
      const AttentionTileBlock blk =
          FusedBlock(s, q, k, v, q_segments, kv_segments, b, h, i0, nq, lo, nk);
      AttentionProbsAndGrads(tiles, blk, dout.bf16() + q_off, lse_b, delta, grads);
      if (want_dq) {  // dQ (nq, D) += dS (nq, nk) @ K (nk, D)
        gemm(false, false, nq, s.head_dim, nk, {grads.ds, true, nk}, kb, 1.0f,
             At(dq, q_off, q_stride), QueryBand(s, i0, lo, false));
      }
      if (!want_dkv) return;  // dK += dS^T Q, dV += P^T dO, dS^T and P^T already in panels
      GemmBf16Scratch& mixed = gemm_bf16_serial_scratch_[static_cast<size_t>(thread)];
      const auto into = [&](const View& grad) {
        const Mat c = At(grad, kv_off, kv_stride);
        return GemmResult{const_cast<void*>(c.data), c.bf16, c.ld};
      };
      AttentionGemmBf16PackedA(mixed, nk, s.head_dim, nq, grads.ds_t,
                               {qb.data, true, q_stride, false}, 1.0f, into(dk),
                               KeyBand(s, i0, lo));
      AttentionGemmBf16PackedA(mixed, nk, s.head_dim, nq, grads.p_t,
                               {dob.data, true, q_stride, false}, 1.0f, into(dv),
                               KeyBand(s, i0, lo));
      return;
    }
    if (static_cast<int64_t>(buf.size()) < 2 * nq * nk) buf.resize(2 * nq * nk);
    float* p = buf.data();             // (nq, nk)
    float* dp = buf.data() + nq * nk;  // (nq, nk)
    // P = exp(scale * Q K^T - lse), 0 where masked
    gemm(false, true, nq, nk, s.head_dim, qb, kb, 0.0f, Scratch32(p, nk),
         QueryBand(s, i0, lo, true));
    const bool masked = !OneSegment(s, q_segments, kv_segments, b, i0, i1, lo, hi);
    if (masked) MaskAndScale(s, b, i0, nq, lo, nk, q_segments, kv_segments, p);
    const float x_scale = masked ? 1.0f : s.scale;  // as the forward's
    for (int64_t r = 0; r < nq; ++r) {
      float* row = p + r * nk;
      if (lse_b[r] == kNegInf) {
        std::fill(row, row + nk, 0.0f);
        continue;
      }
      int64_t c0, end;  // outside the visible run P is 0 (as the forward's)
      VisibleRun(s, i0, r, lo, nk, &c0, &end);
      ExpOfScaled(row + c0, x_scale, lse_b[r], end - c0, row + c0);
      std::fill(row, row + c0, 0.0f);
      std::fill(row + end, row + nk, 0.0f);
    }
    // dP (nq, nk) = dO (nq, D) @ V (nk, D)^T
    gemm(false, true, nq, nk, s.head_dim, dob, vb, 0.0f, Scratch32(dp, nk),
         QueryBand(s, i0, lo, true));
    // A product with a BF16 partner rounds its fp32 operand to bf16: P (for dV, with dO)
    // and dS (for dQ with K, dK with Q) are rounded once here, row by row, and read as
    // bf16 by those products (in place or packed without converting).
    uint16_t* p16 = nullptr;
    uint16_t* ds16 = nullptr;
    if (dob.bf16 || kb.bf16 || qb.bf16) {
      if (static_cast<int64_t>(rounded.size()) < 2 * nq * nk) rounded.resize(2 * nq * nk);
      if (dob.bf16 && want_dkv) p16 = rounded.data();
      if (kb.bf16 || qb.bf16) ds16 = rounded.data() + nq * nk;
    }
    // dS = P * (dP - delta) * scale, delta_r = dO_r . O_r  (stored over dp)
    const bool keep_f32 = ds16 == nullptr || !kb.bf16 || !qb.bf16;
    for (int64_t r = 0; r < nq; ++r) {
      int64_t c0, end;
      VisibleRun(s, i0, r, lo, nk, &c0, &end);
      DsRow(p + r * nk, dp + r * nk, nk, c0, end, delta[r], s.scale, p16 ? p16 + r * nk : nullptr,
            ds16 ? ds16 + r * nk : nullptr, keep_f32);
    }
    const Mat ds_k = ds16 && kb.bf16 ? Mat{ds16, true, nk} : Scratch32(dp, nk);
    const Mat ds_q = ds16 && qb.bf16 ? Mat{ds16, true, nk} : Scratch32(dp, nk);
    const Mat p_do = p16 ? Mat{p16, true, nk} : Scratch32(p, nk);
    // dQ (nq, D) += dS (nq, nk) @ K (nk, D)
    if (want_dq) {
      gemm(false, false, nq, s.head_dim, nk, ds_k, kb, 1.0f, At(dq, q_off, q_stride),
           QueryBand(s, i0, lo, false));
    }
    if (!want_dkv) return;
    // dK (nk, D) += dS^T (nk, nq) @ Q (nq, D)
    gemm(true, false, nk, s.head_dim, nq, ds_q, qb, 1.0f, At(dk, kv_off, kv_stride),
         KeyBand(s, i0, lo));
    // dV (nk, D) += P^T (nk, nq) @ dO (nq, D)
    gemm(true, false, nk, s.head_dim, nq, p_do, dob, 1.0f, At(dv, kv_off, kv_stride),
         KeyBand(s, i0, lo));
  };
  const int64_t q_blocks = (s.q_len + q_block - 1) / q_block;
  if (2 * tasks > pool_->num_threads()) {
    // (b, KV head) tasks: each owns its dK/dV rows and its heads' dQ rows; every tile once.
    pool_->ParallelForBalanced(tasks, 1, [&](int64_t begin, int64_t end, int thread) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t g = t % s.kv_heads, b = t / s.kv_heads;
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          for (int64_t i0 = 0; i0 < s.q_len; i0 += q_block) {
            int64_t lo, hi;
            KeyRange(s, i0, std::min(s.q_len, i0 + q_block), &lo, &hi);
            tile(thread, b, h, i0, lo, hi, true, true);
          }
        }
      }
    });
  } else {
    // Fewer (b, KV head) pairs than half the threads (a small batch of a model with few KV
    // heads on many cores): two passes with many more tasks, recomputing P and dS in the second
    // (two of the tile's five products again). dK/dV per (b, KV head, block of keys), each
    // task's keys' rows its own; then dQ per (b, head, query block). Each output element gets
    // the same products added in the same order as in the one-pass tasks.
    const int64_t key_blocks = (s.kv_len + q_block - 1) / q_block;
    pool_->ParallelForBalanced(tasks * key_blocks, 1, [&](int64_t begin, int64_t end, int thread) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t kb = t % key_blocks, g = (t / key_blocks) % s.kv_heads;
        const int64_t b = t / (key_blocks * s.kv_heads);
        const int64_t k0 = kb * q_block, k1 = std::min(s.kv_len, k0 + q_block);
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          for (int64_t i0 = 0; i0 < s.q_len; i0 += q_block) {
            int64_t lo, hi;
            KeyRange(s, i0, std::min(s.q_len, i0 + q_block), &lo, &hi);
            tile(thread, b, h, i0, std::max(lo, k0), std::min(hi, k1), false, true);
          }
        }
      }
    });
    pool_->ParallelForBalanced(
        s.batch * s.q_heads * q_blocks, 1, [&](int64_t begin, int64_t end, int thread) {
          for (int64_t t = begin; t < end; ++t) {
            const int64_t i0 = (t % q_blocks) * q_block, h = (t / q_blocks) % s.q_heads;
            const int64_t b = t / (q_blocks * s.q_heads);
            int64_t lo, hi;
            KeyRange(s, i0, std::min(s.q_len, i0 + q_block), &lo, &hi);
            tile(thread, b, h, i0, lo, hi, true, false);
          }
        });
  }
  if (!sinks_view.empty() && !dsinks_view.empty()) {
    SinkGradients(*pool_, s, SinkValues(sinks_view), out, dout, lse, dsinks_view);
  }
}

}  // namespace air::engine
