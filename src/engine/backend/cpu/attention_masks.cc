// Attention's visibility rules per block (see attention_masks.h).
#include "engine/backend/cpu/attention_masks.h"

#include <algorithm>

namespace air::engine {

void KeyRange(const AttentionShape& s, int64_t i0, int64_t i1, int64_t* lo, int64_t* hi) {
  *hi = std::min(s.kv_len, s.q_offset + i1);  // causal: key <= q_offset + i
  *lo = 0;
  if (s.sliding_window > 0) *lo = std::max<int64_t>(0, s.q_offset + i0 - s.sliding_window + 1);
  if (*lo > *hi) *lo = *hi;
}

void VisibleRun(const AttentionShape& s, int64_t i0, int64_t r, int64_t lo, int64_t nk, int64_t* c0,
                int64_t* c1) {
  const int64_t q_abs = s.q_offset + i0 + r;
  int64_t first = lo;
  if (s.sliding_window > 0) first = std::max(first, q_abs - s.sliding_window + 1);
  *c0 = std::min(nk, first - lo);
  *c1 = std::max(*c0, std::min(nk, q_abs - lo + 1));
}

bool OneSegment(const AttentionShape& s, const int32_t* q_segments, const int32_t* kv_segments,
                int64_t b, int64_t i0, int64_t i1, int64_t lo, int64_t hi) {
  if (q_segments == nullptr) return true;
  const int32_t* queries = q_segments + b * s.q_len;
  const int32_t* keys = kv_segments + b * s.kv_rows();
  const int32_t id = queries[i0];
  for (int64_t i = i0; i < i1; ++i) {
    if (queries[i] != id) return false;
  }
  for (int64_t c = lo; c < hi; ++c) {
    if (keys[c] != id) return false;
  }
  return true;
}

void MaskAndScale(const AttentionShape& s, int64_t b, int64_t i0, int64_t nq, int64_t lo,
                  int64_t nk, const int32_t* q_segments, const int32_t* kv_segments,
                  float* scores) {
  for (int64_t r = 0; r < nq; ++r) {
    float* row = scores + r * nk;
    int64_t c0, c1;
    VisibleRun(s, i0, r, lo, nk, &c0, &c1);
    std::fill(row, row + c0, kAttentionNegInf);
    if (q_segments == nullptr) {
      for (int64_t c = c0; c < c1; ++c) row[c] *= s.scale;
    } else {
      const int32_t mine = q_segments[b * s.q_len + i0 + r];
      const int32_t* keys = kv_segments + b * s.kv_rows() + lo;
      for (int64_t c = c0; c < c1; ++c)
        row[c] = keys[c] == mine ? row[c] * s.scale : kAttentionNegInf;
    }
    std::fill(row + c1, row + nk, kAttentionNegInf);
  }
}

}  // namespace air::engine
