// FastOps attention: the reference math (reference_ops.cc) reorganized into tiles so the heavy
// parts are GEMMs. For one batch row b and query head h, a block of up to kQueryBlock queries
// [i0, i1) can see only keys [lo, hi) (causal bound and sliding window), so
//   S = scale * Q[i0:i1] @ K[lo:hi]^T, masked;  P = softmax(S);  O[i0:i1] = P @ V[lo:hi]
// and the backward recomputes P from the saved log-sum-exp:
//   dP = dO @ V^T;  dS = P * (dP - rowsum(dO * O)) * scale
//   dQ += dS @ K;  dK += dS^T @ Q;  dV += P^T @ dO
// Forward tasks are (b, h, query block); backward tasks are (b, kv head) so that each task owns
// the dK/dV rows it writes (no races, deterministic).
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/ops/cpu/fast_ops.h"
#include "engine/ops/cpu/vec_math.h"

namespace air::engine {

namespace {

constexpr int64_t kQueryBlock = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The key range [lo, hi) that queries [i0, i1) of a row may see before segment masking.
void KeyRange(const AttentionShape& s, int64_t i0, int64_t i1, int64_t* lo, int64_t* hi) {
  *hi = std::min(s.kv_len, s.q_offset + i1);  // causal: key <= q_offset + i
  *lo = 0;
  if (s.sliding_window > 0) *lo = std::max<int64_t>(0, s.q_offset + i0 - s.sliding_window + 1);
  if (*lo > *hi) *lo = *hi;
}

// Fills S (nq, nk) rows with scaled scores, setting invisible entries to -inf. `scores` holds
// the raw dot products on entry.
void MaskAndScale(const AttentionShape& s, int64_t b, int64_t i0, int64_t nq, int64_t lo,
                  int64_t nk, const int32_t* q_segments, const int32_t* kv_segments,
                  float* scores) {
  for (int64_t r = 0; r < nq; ++r) {
    float* row = scores + r * nk;
    for (int64_t c = 0; c < nk; ++c) {
      row[c] = AttentionVisible(s, b, i0 + r, lo + c, q_segments, kv_segments) ? row[c] * s.scale
                                                                               : kNegInf;
    }
  }
}

}  // namespace

void FastOps::AttentionForward(const AttentionShape& s, const float* q, const float* k,
                               const float* v, const int32_t* q_segments,
                               const int32_t* kv_segments, float* out, float* lse) const {
  const int64_t q_blocks = (s.q_len + kQueryBlock - 1) / kQueryBlock;
  const int64_t tasks = s.batch * s.q_heads * q_blocks;
  const int64_t group = s.q_heads / s.kv_heads;
  const int64_t q_stride = s.q_heads * s.head_dim, kv_stride = s.kv_heads * s.head_dim;
  pool_->ParallelFor(tasks, 1, [&](int64_t begin, int64_t end, int thread) {
    auto& scores_buf = attention_scratch_[static_cast<size_t>(thread)];
    auto& gemm_buf = gemm_serial_scratch_[static_cast<size_t>(thread)];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t blk = t % q_blocks, h = (t / q_blocks) % s.q_heads;
      const int64_t b = t / (q_blocks * s.q_heads);
      const int64_t i0 = blk * kQueryBlock, i1 = std::min(s.q_len, i0 + kQueryBlock);
      const int64_t nq = i1 - i0;
      int64_t lo, hi;
      KeyRange(s, i0, i1, &lo, &hi);
      const int64_t nk = hi - lo;
      const float* qb = q + (b * s.q_len + i0) * q_stride + h * s.head_dim;
      const float* kb = k + (b * s.kv_rows() + lo) * kv_stride + (h / group) * s.head_dim;
      const float* vb = v + (b * s.kv_rows() + lo) * kv_stride + (h / group) * s.head_dim;
      float* ob = out + (b * s.q_len + i0) * q_stride + h * s.head_dim;
      float* lse_b = lse ? lse + (b * s.q_heads + h) * s.q_len + i0 : nullptr;
      if (nk <= 0) {
        for (int64_t r = 0; r < nq; ++r) {
          std::fill(ob + r * q_stride, ob + r * q_stride + s.head_dim, 0.0f);
          if (lse_b) lse_b[r] = kNegInf;
        }
        continue;
      }
      if (static_cast<int64_t>(scores_buf.size()) < nq * nk) scores_buf.resize(nq * nk);
      float* scores = scores_buf.data();
      // S (nq, nk) = Q (nq, D) @ K (nk, D)^T
      FastGemmSerial(gemm_buf, false, true, nq, nk, s.head_dim, qb, q_stride, kb, kv_stride, 0.0f,
                     scores, nk);
      MaskAndScale(s, b, i0, nq, lo, nk, q_segments, kv_segments, scores);
      for (int64_t r = 0; r < nq; ++r) {  // softmax rows in place
        float* row = scores + r * nk;
        float max_score = kNegInf;
        for (int64_t c = 0; c < nk; ++c) max_score = std::max(max_score, row[c]);
        if (max_score == kNegInf) {  // nothing visible: zero output
          std::fill(row, row + nk, 0.0f);
          if (lse_b) lse_b[r] = kNegInf;
          continue;
        }
        const double denom = ExpShifted(row, max_score, 1.0f, nk, row);
        const float inv = static_cast<float>(1.0 / denom);
        for (int64_t c = 0; c < nk; ++c) row[c] *= inv;
        if (lse_b) lse_b[r] = static_cast<float>(max_score + std::log(denom));
      }
      // O (nq, D) = P (nq, nk) @ V (nk, D)
      FastGemmSerial(gemm_buf, false, false, nq, s.head_dim, nk, scores, nk, vb, kv_stride, 0.0f,
                     ob, q_stride);
    }
  });
}

void FastOps::AttentionBackward(const AttentionShape& s, const float* q, const float* k,
                                const float* v, const int32_t* q_segments,
                                const int32_t* kv_segments, const float* out, const float* lse,
                                const float* dout, float* dq, float* dk, float* dv) const {
  const int64_t group = s.q_heads / s.kv_heads;
  const int64_t q_stride = s.q_heads * s.head_dim, kv_stride = s.kv_heads * s.head_dim;
  const int64_t tasks = s.batch * s.kv_heads;
  pool_->ParallelFor(tasks, 1, [&](int64_t begin, int64_t end, int thread) {
    auto& buf = attention_scratch_[static_cast<size_t>(thread)];
    auto& gemm_buf = gemm_serial_scratch_[static_cast<size_t>(thread)];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t g = t % s.kv_heads, b = t / s.kv_heads;
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t i0 = 0; i0 < s.q_len; i0 += kQueryBlock) {
          const int64_t i1 = std::min(s.q_len, i0 + kQueryBlock), nq = i1 - i0;
          int64_t lo, hi;
          KeyRange(s, i0, i1, &lo, &hi);
          const int64_t nk = hi - lo;
          if (nk <= 0) continue;
          if (static_cast<int64_t>(buf.size()) < 2 * nq * nk) buf.resize(2 * nq * nk);
          float* p = buf.data();             // (nq, nk)
          float* dp = buf.data() + nq * nk;  // (nq, nk)
          const int64_t q_off = (b * s.q_len + i0) * q_stride + h * s.head_dim;
          const int64_t kv_off = (b * s.kv_rows() + lo) * kv_stride + g * s.head_dim;
          const float* lse_b = lse + (b * s.q_heads + h) * s.q_len + i0;
          // P = exp(scale * Q K^T - lse), 0 where masked
          FastGemmSerial(gemm_buf, false, true, nq, nk, s.head_dim, q + q_off, q_stride, k + kv_off,
                         kv_stride, 0.0f, p, nk);
          MaskAndScale(s, b, i0, nq, lo, nk, q_segments, kv_segments, p);
          for (int64_t r = 0; r < nq; ++r) {
            float* row = p + r * nk;
            if (lse_b[r] == kNegInf) {
              std::fill(row, row + nk, 0.0f);
              continue;
            }
            ExpShifted(row, lse_b[r], 1.0f, nk, row);
          }
          // dP (nq, nk) = dO (nq, D) @ V (nk, D)^T
          FastGemmSerial(gemm_buf, false, true, nq, nk, s.head_dim, dout + q_off, q_stride,
                         v + kv_off, kv_stride, 0.0f, dp, nk);
          // dS = P * (dP - delta) * scale, delta_r = dO_r . O_r  (stored over dp)
          for (int64_t r = 0; r < nq; ++r) {
            const float* do_r = dout + q_off + r * q_stride;
            const float* o_r = out + q_off + r * q_stride;
            double delta = 0.0;
            for (int64_t d = 0; d < s.head_dim; ++d) delta += do_r[d] * o_r[d];
            float* dp_row = dp + r * nk;
            const float* p_row = p + r * nk;
            for (int64_t c = 0; c < nk; ++c) {
              dp_row[c] = p_row[c] * (dp_row[c] - static_cast<float>(delta)) * s.scale;
            }
          }
          // dQ (nq, D) += dS (nq, nk) @ K (nk, D)
          FastGemmSerial(gemm_buf, false, false, nq, s.head_dim, nk, dp, nk, k + kv_off, kv_stride,
                         1.0f, dq + q_off, q_stride);
          // dK (nk, D) += dS^T (nk, nq) @ Q (nq, D)
          FastGemmSerial(gemm_buf, true, false, nk, s.head_dim, nq, dp, nk, q + q_off, q_stride,
                         1.0f, dk + kv_off, kv_stride);
          // dV (nk, D) += P^T (nk, nq) @ dO (nq, D)
          FastGemmSerial(gemm_buf, true, false, nk, s.head_dim, nq, p, nk, dout + q_off, q_stride,
                         1.0f, dv + kv_off, kv_stride);
        }
      }
    }
  });
}

}  // namespace air::engine
