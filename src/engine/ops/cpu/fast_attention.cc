// FastOps attention: the reference math (reference_ops.cc) reorganized into tiles so the heavy
// parts are GEMMs. For one batch row b and query head h, a block of up to kQueryBlock queries
// [i0, i1) can see only keys [lo, hi) (causal bound and sliding window), so
//   S = scale * Q[i0:i1] @ K[lo:hi]^T, masked;  P = softmax(S);  O[i0:i1] = P @ V[lo:hi]
// and the backward recomputes P from the saved log-sum-exp:
//   dP = dO @ V^T;  dS = P * (dP - rowsum(dO * O)) * scale
//   dQ += dS @ K;  dK += dS^T @ Q;  dV += P^T @ dO
// Forward tasks are (b, h, query block); backward tasks are (b, kv head) so that each task owns
// the dK/dV rows it writes (no races, deterministic). BF16 views are staged as fp32 for the
// call (F32Input / F32Output: widened once, results rounded once). Sinks (GPT-OSS) join each
// row's max and denominator in the forward; the backward's P comes from the lse, which includes
// them, and their gradient -sum_i exp(sink - lse_i) (dO_i . O_i) is a separate pass per head
// (SinkGradients) so that no two tasks write the same dsink.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/ops/cpu/convert.h"
#include "engine/ops/cpu/fast_ops.h"
#include "engine/ops/cpu/reference_ops.h"
#include "engine/ops/cpu/vec_math.h"
#include "engine/ops/op_checks.h"

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

// The sinks of a call as fp32 (empty when the view is).
std::vector<float> SinkValues(const View& sinks) {
  std::vector<float> values(static_cast<size_t>(sinks.numel()));
  if (!sinks.empty()) LoadF32(sinks, 0, sinks.numel(), values.data());
  return values;
}

// dsinks[h] += -sum over rows b and queries i of exp(sink_h - lse) * (dO . O), per head in
// double (rows that saw nothing, lse = -inf, have no sink and add nothing).
void SinkGradients(const AttentionShape& s, const float* sinks, const float* out, const float* dout,
                   const float* lse, float* dsinks) {
  const int64_t q_stride = s.q_heads * s.head_dim;
  for (int64_t h = 0; h < s.q_heads; ++h) {
    double sum = 0.0;
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t i = 0; i < s.q_len; ++i) {
        const float l = lse[(b * s.q_heads + h) * s.q_len + i];
        if (l == kNegInf) continue;
        const int64_t off = (b * s.q_len + i) * q_stride + h * s.head_dim;
        double delta = 0.0;
        for (int64_t d = 0; d < s.head_dim; ++d) delta += dout[off + d] * out[off + d];
        sum += std::exp(static_cast<double>(sinks[h]) - l) * delta;
      }
    }
    dsinks[h] -= static_cast<float>(sum);
  }
}

}  // namespace

void FastOps::AttentionForward(const AttentionShape& s, const View& q_view, const View& k_view,
                               const View& v_view, const View& sinks_view, const View& q_seg,
                               const View& kv_seg, const View& out_view,
                               const View& lse_view) const {
  const OpKind op = OpKind::kAttentionForward;
  for (const auto& [x, name] : {std::pair{&q_view, "q"}, std::pair{&k_view, "k"},
                                std::pair{&v_view, "v"}, std::pair{&out_view, "out"}}) {
    CheckData(*this, op, *x, name);
  }
  CheckIndex(op, q_seg, "q_segments");
  CheckIndex(op, kv_seg, "kv_segments");
  CheckF32(op, lse_view, "lse");
  if (!sinks_view.empty()) {
    CheckData(*this, op, sinks_view, "sinks");
    CheckSize(op, sinks_view, s.q_heads, "sinks");
  }
  const int64_t q_size = s.batch * s.q_len * s.q_heads * s.head_dim;
  const int64_t kv_size = s.batch * s.kv_rows() * s.kv_heads * s.head_dim;
  CheckSize(op, q_view, q_size, "q");
  CheckSize(op, out_view, q_size, "out");
  CheckSize(op, k_view, kv_size, "k");
  CheckSize(op, v_view, kv_size, "v");
  if (!lse_view.empty()) CheckSize(op, lse_view, s.batch * s.q_heads * s.q_len, "lse");
  const std::vector<float> sinks = SinkValues(sinks_view);
  const F32Input q_in(q_view), k_in(k_view), v_in(v_view);
  F32Output out_stage(out_view, false);
  const float *q = q_in.get(), *k = k_in.get(), *v = v_in.get();
  float* out = out_stage.get();
  float* lse = lse_view.empty() ? nullptr : lse_view.f32();
  const int32_t* q_segments = q_seg.empty() ? nullptr : q_seg.i32();
  const int32_t* kv_segments = kv_seg.empty() ? nullptr : kv_seg.i32();
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
      const float sink = sinks.empty() ? kNegInf : sinks[static_cast<size_t>(h)];
      if (nk <= 0) {
        for (int64_t r = 0; r < nq; ++r) {
          std::fill(ob + r * q_stride, ob + r * q_stride + s.head_dim, 0.0f);
          if (lse_b) lse_b[r] = sink;  // all weight on the sink, or nothing seen
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
        float max_score = sink;
        for (int64_t c = 0; c < nk; ++c) max_score = std::max(max_score, row[c]);
        if (max_score == kNegInf) {  // nothing visible, no sink: zero output
          std::fill(row, row + nk, 0.0f);
          if (lse_b) lse_b[r] = kNegInf;
          continue;
        }
        const double denom = ExpShifted(row, max_score, 1.0f, nk, row) +
                             (sink == kNegInf ? 0.0 : std::exp(double{sink} - max_score));
        const float inv = static_cast<float>(1.0 / denom);
        for (int64_t c = 0; c < nk; ++c) row[c] *= inv;
        if (lse_b) lse_b[r] = static_cast<float>(max_score + std::log(denom));
      }
      // O (nq, D) = P (nq, nk) @ V (nk, D)
      FastGemmSerial(gemm_buf, false, false, nq, s.head_dim, nk, scores, nk, vb, kv_stride, 0.0f,
                     ob, q_stride);
    }
  });
  out_stage.Store();
}

void FastOps::AttentionBackward(const AttentionShape& s, const View& q_view, const View& k_view,
                                const View& v_view, const View& sinks_view, const View& q_seg,
                                const View& kv_seg, const View& out_view, const View& lse_view,
                                const View& dout_view, const View& dq_view, const View& dk_view,
                                const View& dv_view, const View& dsinks_view) const {
  const OpKind op = OpKind::kAttentionBackward;
  for (const auto& [x, name] :
       {std::pair{&q_view, "q"}, std::pair{&k_view, "k"}, std::pair{&v_view, "v"},
        std::pair{&out_view, "out"}, std::pair{&dout_view, "dout"}, std::pair{&dq_view, "dq"},
        std::pair{&dk_view, "dk"}, std::pair{&dv_view, "dv"}}) {
    CheckData(*this, op, *x, name);
  }
  CheckIndex(op, q_seg, "q_segments");
  CheckIndex(op, kv_seg, "kv_segments");
  CheckF32(op, lse_view, "lse");
  const int64_t q_size = s.batch * s.q_len * s.q_heads * s.head_dim;
  const int64_t kv_size = s.batch * s.kv_rows() * s.kv_heads * s.head_dim;
  CheckSize(op, q_view, q_size, "q");
  CheckSize(op, out_view, q_size, "out");
  CheckSize(op, dout_view, q_size, "dout");
  CheckSize(op, dq_view, q_size, "dq");
  CheckSize(op, k_view, kv_size, "k");
  CheckSize(op, v_view, kv_size, "v");
  CheckSize(op, dk_view, kv_size, "dk");
  CheckSize(op, dv_view, kv_size, "dv");
  CheckSize(op, lse_view, s.batch * s.q_heads * s.q_len, "lse");
  CheckF32(op, dsinks_view, "dsinks");
  if (!sinks_view.empty()) {
    CheckData(*this, op, sinks_view, "sinks");
    CheckSize(op, sinks_view, s.q_heads, "sinks");
  }
  if (!dsinks_view.empty()) CheckSize(op, dsinks_view, s.q_heads, "dsinks");
  const F32Input q_in(q_view), k_in(k_view), v_in(v_view), out_in(out_view), dout_in(dout_view);
  F32Output dq_stage(dq_view, true), dk_stage(dk_view, true), dv_stage(dv_view, true);
  const float *q = q_in.get(), *k = k_in.get(), *v = v_in.get(), *out = out_in.get();
  const float* dout = dout_in.get();
  float *dq = dq_stage.get(), *dk = dk_stage.get(), *dv = dv_stage.get();
  const float* lse = lse_view.f32();
  const int32_t* q_segments = q_seg.empty() ? nullptr : q_seg.i32();
  const int32_t* kv_segments = kv_seg.empty() ? nullptr : kv_seg.i32();
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
  if (!sinks_view.empty() && !dsinks_view.empty()) {
    const std::vector<float> sinks = SinkValues(sinks_view);
    SinkGradients(s, sinks.data(), out, dout, lse, dsinks_view.f32());
  }
  dq_stage.Store();
  dk_stage.Store();
  dv_stage.Store();
}

}  // namespace air::engine
