// Which keys each query of a FastOps attention block sees (the causal bound, the sliding window
// and packed segments of op_semantics.h's AttentionVisible), shared by the tiles of
// fast_attention.cc and the fused avx512bf16 tiles of attention_tile.h. A block is queries
// [i0, i1) of one batch row against keys [lo, hi); columns are keys relative to lo.
// Thread safety: pure functions of their arguments (MaskAndScale writes only its `scores`).
#pragma once

#include <cstdint>
#include <limits>

#include "engine/ops/op_semantics.h"

namespace air::engine {

inline constexpr float kAttentionNegInf = -std::numeric_limits<float>::infinity();

// The key range [lo, hi) that queries [i0, i1) of a row may see before segment masking.
void KeyRange(const AttentionShape& s, int64_t i0, int64_t i1, int64_t* lo, int64_t* hi);

// The columns [c0, c1) of row r of a block (queries from i0, keys from lo, nk of them) that the
// causal and window limits leave visible: AttentionVisible's rule but for segments, which are
// checked only inside this run.
void VisibleRun(const AttentionShape& s, int64_t i0, int64_t r, int64_t lo, int64_t nk, int64_t* c0,
                int64_t* c1);

// Whether a block's segment ids leave it unmasked: no segments, or queries [i0, i1) and keys
// [lo, hi) of batch row b all in one segment (then only the causal and window limits mask it).
bool OneSegment(const AttentionShape& s, const int32_t* q_segments, const int32_t* kv_segments,
                int64_t b, int64_t i0, int64_t i1, int64_t lo, int64_t hi);

// For a block across segments: fills S (nq rows of nk, row stride nk) with scaled scores,
// setting invisible entries to -inf. `scores` holds the raw dot products on entry (inside each
// row's visible run; the rest is not read). Row by row, the visible run (VisibleRun) is scaled in
// one pass and its keys' segments checked.
void MaskAndScale(const AttentionShape& s, int64_t b, int64_t i0, int64_t nq, int64_t lo,
                  int64_t nk, const int32_t* q_segments, const int32_t* kv_segments, float* scores);

}  // namespace air::engine
