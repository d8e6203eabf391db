// The reference's fp32 loops (see reference_loops.h): one per op, plain and single-threaded,
// sums in double where they run long. ReferenceOps (reference_ops.cc) runs them on fp32 views of
// its arguments.
#include "engine/backend/cpu/reference_loops.h"

#include <cmath>
#include <limits>
#include <vector>

#include "engine/backend/cpu/reference_ops.h"
#include "engine/data/batch.h"

namespace air::engine {

// C (M, N) = op(A) (M, K) @ op(B) (K, N) + beta * C, each dot product in double.
void RefGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
             int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const float a_ip = trans_a ? a[p * lda + i] : a[i * lda + p];
        const float b_pj = trans_b ? b[j * ldb + p] : b[p * ldb + j];
        sum += static_cast<double>(a_ip) * b_pj;
      }
      float& out = c[i * ldc + j];
      out = beta == 0.0f ? static_cast<float>(sum) : static_cast<float>(sum + beta * out);
    }
  }
}

// out (N, C) = table (V, C) [ids (N)]
void RefEmbeddingForward(const int32_t* ids, int64_t n, const float* table, int64_t dim,
                         float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = table + static_cast<int64_t>(ids[i]) * dim;
    for (int64_t c = 0; c < dim; ++c) out[i * dim + c] = row[c];
  }
}

// dtable (V, C) [ids[n]] += dout (N, C) [n]
void RefEmbeddingBackward(const int32_t* ids, int64_t n, const float* dout, int64_t dim,
                          int32_t skip_id, float* dtable) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] == skip_id) continue;
    float* row = dtable + static_cast<int64_t>(ids[i]) * dim;
    for (int64_t c = 0; c < dim; ++c) row[c] += dout[i * dim + c];
  }
}

// y (N, C) = w (C) * x (N, C) * rstd (N),  rstd = 1 / sqrt(mean_c x^2 + eps)
void RefRmsNormForward(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                       float* y, float* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double sum_sq = 0.0;
    for (int64_t c = 0; c < dim; ++c) sum_sq += static_cast<double>(xr[c]) * xr[c];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / dim + eps));
    rstd[r] = inv;
    for (int64_t c = 0; c < dim; ++c) y[r * dim + c] = w[c] * (xr[c] * inv);
  }
}

// With g = w * dy:  dx = rstd * g - rstd^3 / C * x * sum_c(g * x);  dw += dy * x * rstd
void RefRmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy,
                        int64_t rows, int64_t dim, float* dx, float* dw) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* dyr = dy + r * dim;
    const double inv = rstd[r];
    double dot = 0.0;  // sum_c w * dy * x
    for (int64_t c = 0; c < dim; ++c) dot += static_cast<double>(w[c]) * dyr[c] * xr[c];
    const double coef = inv * inv * inv * dot / static_cast<double>(dim);
    for (int64_t c = 0; c < dim; ++c) {
      dx[r * dim + c] += static_cast<float>(inv * w[c] * dyr[c] - coef * xr[c]);
      if (dw != nullptr) dw[c] += static_cast<float>(static_cast<double>(dyr[c]) * xr[c] * inv);
    }
  }
}

// x (N, H, D): (x1, x2) = (x[:D/2], x[D/2:]) -> (x1 cos - x2 sin, x2 cos + x1 sin), per token
// with cos/sin (N, D/2).
void RefRopeForward(float* x, int64_t n, int64_t heads, int64_t head_dim, const float* cos,
                    const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float c = cos[t * half + i], s = sin[t * half + i];
        const float x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

// The transposed rotation: (d1, d2) -> (d1 cos + d2 sin, d2 cos - d1 sin).
void RefRopeBackward(float* dx, int64_t n, int64_t heads, int64_t head_dim, const float* cos,
                     const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      float* v = dx + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float c = cos[t * half + i], s = sin[t * half + i];
        const float d1 = v[i], d2 = v[i + half];
        v[i] = d1 * c + d2 * s;
        v[i + half] = d2 * c - d1 * s;
      }
    }
  }
}

namespace {

// Row pointers into the attention tensors: q/out (B, Tq, Hq, D), k/v (B, rows, Hkv, D).
struct AttentionIndex {
  const AttentionShape& s;
  int64_t q_row(int64_t b, int64_t i, int64_t h) const {
    return ((b * s.q_len + i) * s.q_heads + h) * s.head_dim;
  }
  int64_t kv_row(int64_t b, int64_t j, int64_t h) const {
    const int64_t kv_head = h / (s.q_heads / s.kv_heads);
    return ((b * s.kv_rows() + j) * s.kv_heads + kv_head) * s.head_dim;
  }
};

double Dot(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

}  // namespace

// For each row b, query head h, query i:
//   score_j = scale * q_i . k_j over visible keys j; with sinks the sink logit joins the softmax
//   as one more score without a value; p = softmax(scores); out_i = sum_j p_j v_j
//   lse (B, Hq, Tq) = log(sum_j exp(score_j) [+ exp(sink_h)])
void RefAttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v,
                         const float* sinks, const int32_t* q_segments, const int32_t* kv_segments,
                         float* out, float* lse) {
  const AttentionIndex idx{s};
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  std::vector<double> scores(static_cast<size_t>(s.kv_len));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.q_heads; ++h) {
      const double sink = sinks != nullptr ? sinks[h] : kNegInf;
      for (int64_t i = 0; i < s.q_len; ++i) {
        const float* qi = q + idx.q_row(b, i, h);
        double max_score = sink;
        for (int64_t j = 0; j < s.kv_len; ++j) {
          if (!AttentionVisible(s, b, i, j, q_segments, kv_segments)) {
            scores[j] = kNegInf;
            continue;
          }
          scores[j] = s.scale * Dot(qi, k + idx.kv_row(b, j, h), s.head_dim);
          max_score = std::max(max_score, scores[j]);
        }
        float* oi = out + idx.q_row(b, i, h);
        for (int64_t d = 0; d < s.head_dim; ++d) oi[d] = 0.0f;
        float* lse_i = lse ? lse + (b * s.q_heads + h) * s.q_len + i : nullptr;
        if (max_score == kNegInf) {  // nothing visible, no sink
          if (lse_i) *lse_i = -std::numeric_limits<float>::infinity();
          continue;
        }
        double denom = sinks != nullptr ? std::exp(sink - max_score) : 0.0;
        for (int64_t j = 0; j < s.kv_len; ++j) {
          scores[j] = std::exp(scores[j] - max_score);  // exp(-inf) = 0 for masked keys
          denom += scores[j];
        }
        std::vector<double> acc(static_cast<size_t>(s.head_dim), 0.0);
        for (int64_t j = 0; j < s.kv_len; ++j) {
          if (scores[j] == 0.0) continue;
          const float* vj = v + idx.kv_row(b, j, h);
          for (int64_t d = 0; d < s.head_dim; ++d) acc[d] += scores[j] * vj[d];
        }
        for (int64_t d = 0; d < s.head_dim; ++d) oi[d] = static_cast<float>(acc[d] / denom);
        if (lse_i) *lse_i = static_cast<float>(max_score + std::log(denom));
      }
    }
  }
}

// With p_ij = exp(score_ij - lse_i), dp_ij = dout_i . v_j, delta_i = dout_i . out_i,
// ds_ij = p_ij (dp_ij - delta_i):
//   dq_i += scale sum_j ds_ij k_j;  dk_j += scale sum_i ds_ij q_i;  dv_j += sum_i p_ij dout_i
//   dsink_h += sum_i -exp(sink_h - lse_i) delta_i   (the sink has no value: its dp is 0)
void RefAttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v,
                          const float* sinks, const int32_t* q_segments, const int32_t* kv_segments,
                          const float* out, const float* lse, const float* dout, float* dq,
                          float* dk, float* dv, float* dsinks) {
  const AttentionIndex idx{s};
  std::vector<double> dsink(static_cast<size_t>(s.q_heads), 0.0);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.q_heads; ++h) {
      for (int64_t i = 0; i < s.q_len; ++i) {
        const float lse_i = lse[(b * s.q_heads + h) * s.q_len + i];
        if (std::isinf(lse_i)) continue;  // saw nothing, contributes nothing
        const float* qi = q + idx.q_row(b, i, h);
        const float* doi = dout + idx.q_row(b, i, h);
        const double delta = Dot(doi, out + idx.q_row(b, i, h), s.head_dim);
        if (sinks != nullptr) dsink[h] -= std::exp(double{sinks[h]} - lse_i) * delta;
        float* dqi = dq + idx.q_row(b, i, h);
        for (int64_t j = 0; j < s.kv_len; ++j) {
          if (!AttentionVisible(s, b, i, j, q_segments, kv_segments)) continue;
          const float* kj = k + idx.kv_row(b, j, h);
          const float* vj = v + idx.kv_row(b, j, h);
          const double p = std::exp(s.scale * Dot(qi, kj, s.head_dim) - lse_i);
          const double ds = p * (Dot(doi, vj, s.head_dim) - delta);
          float* dkj = dk + idx.kv_row(b, j, h);
          float* dvj = dv + idx.kv_row(b, j, h);
          for (int64_t d = 0; d < s.head_dim; ++d) {
            dqi[d] += static_cast<float>(s.scale * ds * kj[d]);
            dkj[d] += static_cast<float>(s.scale * ds * qi[d]);
            dvj[d] += static_cast<float>(p * doi[d]);
          }
        }
      }
    }
  }
  if (sinks != nullptr && dsinks != nullptr) {
    for (int64_t h = 0; h < s.q_heads; ++h) dsinks[h] += static_cast<float>(dsink[h]);
  }
}

namespace {
inline double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

// out (n) = silu(gate) * up
void RefSwigluForward(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g * Sigmoid(g) * up[i]);
  }
}

// silu'(g) = sig(g) * (1 + g * (1 - sig(g)))
void RefSwigluBackward(const float* gate, const float* up, const float* dout, int64_t n,
                       float* dgate, float* dup) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double sig = Sigmoid(g);
    dgate[i] += static_cast<float>(dout[i] * up[i] * sig * (1.0 + g * (1.0 - sig)));
    dup[i] += static_cast<float>(dout[i] * g * sig);
  }
}

void RefAddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

// y (N, C) += bias (C)
void RefAddBias(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] += bias[c];
  }
}

// dbias (C) += sum_r dy (N, C)
void RefBiasBackward(const float* dy, int64_t rows, int64_t cols, float* dbias) {
  for (int64_t c = 0; c < cols; ++c) {
    double sum = 0.0;
    for (int64_t r = 0; r < rows; ++r) sum += dy[r * cols + c];
    dbias[c] += static_cast<float>(sum);
  }
}

// loss += sum over rows with a target of lse_r - logits[r, target_r]
void RefCrossEntropyForward(const float* logits, const int32_t* targets, int64_t n, int64_t vocab,
                            float* lse, double* loss_sum) {
  double total = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    const float* row = logits + r * vocab;
    double max_logit = row[0];
    for (int64_t c = 1; c < vocab; ++c) max_logit = std::max(max_logit, double{row[c]});
    double sum = 0.0;
    for (int64_t c = 0; c < vocab; ++c) sum += std::exp(row[c] - max_logit);
    const double row_lse = max_logit + std::log(sum);
    lse[r] = static_cast<float>(row_lse);
    if (targets[r] != kIgnoreIndex) total += row_lse - row[targets[r]];
  }
  *loss_sum += total;
}

// dlogits (N, V) = scale * (softmax - onehot) on rows with a target, else 0
void RefCrossEntropyBackward(const float* logits, const int32_t* targets, const float* lse,
                             int64_t n, int64_t vocab, float scale, float* dlogits) {
  for (int64_t r = 0; r < n; ++r) {
    const float* row = logits + r * vocab;
    float* drow = dlogits + r * vocab;
    if (targets[r] == kIgnoreIndex) {
      for (int64_t c = 0; c < vocab; ++c) drow[c] = 0.0f;
      continue;
    }
    for (int64_t c = 0; c < vocab; ++c) {
      const double p = std::exp(static_cast<double>(row[c]) - lse[r]);
      drow[c] = static_cast<float>(scale * (p - (c == targets[r] ? 1.0 : 0.0)));
    }
  }
}

void RefAdamWUpdate(const AdamWScalars& s, int64_t n, float* p, const float* g, float* m,
                    float* v) {
  for (int64_t j = 0; j < n; ++j) AdamWElement(s, p[j], g[j], m[j], v[j]);
}

double SumOfSquaresLoop(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(x[j]) * x[j];
  return sum;
}

}  // namespace air::engine
