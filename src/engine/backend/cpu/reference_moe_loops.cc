// The reference's fp32 loops for GPT-OSS's mixture of experts (see reference_loops.h and
// ops.h): the clamped SwiGLU of the experts, the top-k router, and the dispatch, gather and
// combine that group a batch's (token, slot) choices by expert. Plain and single-threaded;
// shared with the fast path where an op is index bookkeeping (MoeSlotsByRow).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/backend/cpu/reference_loops.h"

namespace air::engine {

namespace {
inline double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

// out[i] = (u + 1) * g * sigmoid(alpha * g), g = min(gate_up[2i], limit),
// u = clamp(gate_up[2i + 1], -limit, limit)
void RefClampedSwigluForward(const float* gate_up, int64_t n, float alpha, float limit,
                             float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = std::min(gate_up[2 * i], limit);
    const double u = std::clamp(gate_up[2 * i + 1], -limit, limit);
    out[i] = static_cast<float>((u + 1.0) * g * Sigmoid(alpha * g));
  }
}

// d/dg = (u + 1) * (sig + alpha * g * sig * (1 - sig)), d/du = g * sig, each times dout and
// zero where the input was clamped (outside [min, max]).
void RefClampedSwigluBackward(const float* gate_up, const float* dout, int64_t n, float alpha,
                              float limit, float* dgate_up) {
  for (int64_t i = 0; i < n; ++i) {
    const float gate = gate_up[2 * i], up = gate_up[2 * i + 1];
    const double g = std::min(gate, limit);
    const double u = std::clamp(up, -limit, limit);
    const double sig = Sigmoid(alpha * g);
    if (gate <= limit) {
      dgate_up[2 * i] +=
          static_cast<float>(dout[i] * (u + 1.0) * (sig + alpha * g * sig * (1.0 - sig)));
    }
    if (up >= -limit && up <= limit) dgate_up[2 * i + 1] += static_cast<float>(dout[i] * g * sig);
  }
}

// Per token: the k largest logits (stable: the lower expert first among equals), then the
// softmax over them (max-shifted, sums in double).
void RefRouterTopK(const float* logits, int64_t n, int64_t experts, int64_t k, int32_t* indices,
                   float* weights) {
  std::vector<int32_t> order(static_cast<size_t>(experts));
  for (int64_t t = 0; t < n; ++t) {
    const float* row = logits + t * experts;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [row](int32_t a, int32_t b) { return row[a] > row[b]; });
    const double top = row[order[0]];
    double denom = 0.0;
    for (int64_t j = 0; j < k; ++j) denom += std::exp(row[order[j]] - top);
    for (int64_t j = 0; j < k; ++j) {
      indices[t * k + j] = order[j];
      weights[t * k + j] = static_cast<float>(std::exp(row[order[j]] - top) / denom);
    }
  }
}

// dlogits[t, idx_j] += w_j * (dw_j - sum_m w_m dw_m)
void RefRouterTopKBackward(const int32_t* indices, const float* weights, const float* dweights,
                           int64_t n, int64_t experts, int64_t k, float* dlogits) {
  for (int64_t t = 0; t < n; ++t) {
    const float* w = weights + t * k;
    const float* dw = dweights + t * k;
    double dot = 0.0;
    for (int64_t j = 0; j < k; ++j) dot += static_cast<double>(w[j]) * dw[j];
    for (int64_t j = 0; j < k; ++j) {
      dlogits[t * experts + indices[t * k + j]] += static_cast<float>(w[j] * (dw[j] - dot));
    }
  }
}

// Counting sort of the N*k choices by expert, tokens in order within an expert.
void RefMoeDispatch(const int32_t* indices, int64_t n, int64_t k, int64_t experts, int32_t* offsets,
                    int32_t* token_of_row, int32_t* row_of_slot) {
  std::fill(offsets, offsets + experts + 1, 0);
  for (int64_t i = 0; i < n * k; ++i) offsets[indices[i] + 1]++;
  for (int64_t e = 0; e < experts; ++e) offsets[e + 1] += offsets[e];
  std::vector<int32_t> next(offsets, offsets + experts);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t row = next[indices[t * k + j]]++;
      token_of_row[row] = static_cast<int32_t>(t);
      row_of_slot[t * k + j] = row;
    }
  }
}

void MoeSlotsByRow(const int32_t* row_of_slot_n, int64_t k, int32_t* order) {
  std::iota(order, order + k, 0);
  std::sort(order, order + k,
            [row_of_slot_n](int32_t a, int32_t b) { return row_of_slot_n[a] < row_of_slot_n[b]; });
}

// grouped[r] = x[token_of_row[r]]
void RefMoeGather(const float* x, const int32_t* token_of_row, int64_t rows, int64_t dim,
                  float* grouped) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(x + token_of_row[r] * dim, x + (token_of_row[r] + 1) * dim, grouped + r * dim);
  }
}

// dx[t] += sum over t's rows (ascending) of dgrouped[row], the sum in double
void RefMoeGatherBackward(const float* dgrouped, const int32_t* row_of_slot, int64_t n, int64_t k,
                          int64_t dim, float* dx) {
  std::vector<int32_t> order(static_cast<size_t>(k));
  for (int64_t t = 0; t < n; ++t) {
    MoeSlotsByRow(row_of_slot + t * k, k, order.data());
    for (int64_t c = 0; c < dim; ++c) {
      double sum = 0.0;
      for (int32_t j : order) sum += dgrouped[row_of_slot[t * k + j] * dim + c];
      dx[t * dim + c] += static_cast<float>(sum);
    }
  }
}

// out[t] = (((0 + w_a y_a) + w_b y_b) + ...) in ascending row order, each step rounded to fp32
// (transformers' weighted outputs added by index_add_ in expert order).
void RefMoeCombine(const float* y, const float* weights, const int32_t* row_of_slot, int64_t n,
                   int64_t k, int64_t dim, float* out) {
  std::vector<int32_t> order(static_cast<size_t>(k));
  for (int64_t t = 0; t < n; ++t) {
    MoeSlotsByRow(row_of_slot + t * k, k, order.data());
    for (int64_t c = 0; c < dim; ++c) {
      float sum = 0.0f;
      for (int32_t j : order) {
        const float product = y[row_of_slot[t * k + j] * dim + c] * weights[t * k + j];
        sum += product;
      }
      out[t * dim + c] = sum;
    }
  }
}

// dy[row] = w * dout[t];  dweights[t, j] += dout[t] . y[row] (in double)
void RefMoeCombineBackward(const float* y, const float* weights, const int32_t* row_of_slot,
                           const float* dout, int64_t n, int64_t k, int64_t dim, float* dy,
                           float* dweights) {
  for (int64_t t = 0; t < n; ++t) {
    const float* d = dout + t * dim;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = row_of_slot[t * k + j];
      const float w = weights[t * k + j];
      double dot = 0.0;
      for (int64_t c = 0; c < dim; ++c) {
        dy[row * dim + c] = w * d[c];
        dot += static_cast<double>(d[c]) * y[row * dim + c];
      }
      dweights[t * k + j] += static_cast<float>(dot);
    }
  }
}

}  // namespace air::engine
