// The sizes an op derives from its views, where the views' shapes leave more than one reading:
// RoPE's (N, H, D) from x and its (N, D/2) tables, and the (N, k) of a router's or a dispatch's
// index views. The argument checks (ops_checked.cc) and every backend's kernels read them here,
// so a backend cannot size an op differently from the checks that passed it.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "engine/view.h"

namespace air::engine {

// N, heads and D of a RoPE call: the tables are (N, D/2), x is (N, H, D).
struct RopeDims {
  int64_t n, heads, head_dim;
};
inline RopeDims RopeShape(const View& x, const View& cos) {
  const int64_t n = cos.dim(0), head_dim = 2 * cos.dim(-1);
  const int64_t heads = n > 0 && head_dim > 0 ? x.numel() / (n * head_dim) : 0;
  return {n, heads, head_dim};
}

// k of a router's or a dispatch's (N, k) view, and N = its elements / k.
inline int64_t TopK(const View& indices) { return indices.shape().empty() ? 1 : indices.dim(-1); }
inline int64_t Tokens(const View& indices) {
  const int64_t k = TopK(indices);
  return k > 0 ? indices.numel() / k : 0;
}

}  // namespace air::engine
