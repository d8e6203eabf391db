// Attention's fused avx512bf16 tiles (see attention_tile.h).
#include "engine/backend/cpu/attention_tile.h"

#include <immintrin.h>

// GCC 12 reports the deliberately undefined pass-through operand inside the unmasked AVX-512
// intrinsics as uninitialized (a false positive; as in vec_math.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/backend/cpu/attention_gemm.h"
#include "engine/backend/cpu/attention_masks.h"
#include "engine/backend/cpu/bf16_simd.h"
#include "engine/backend/cpu/exp_simd.h"
#include "engine/backend/cpu/gemm_kernels.h"
#include "engine/backend/cpu/gemm_mixed_pack.h"
#include "engine/backend/cpu/vec_math.h"

namespace air::engine {
namespace {

constexpr int64_t kMR = kBf16KernelMR;  // queries per strip
constexpr int64_t kNR = kBf16KernelNR;  // keys (or dims) per panel
constexpr float kNegInf = kAttentionNegInf;
static_assert(kMR == kAttentionPanelRows);  // a strip's rows are a panel's steps

template <typename T>
T* Grown(std::vector<T>& buffer, int64_t size) {
  if (static_cast<int64_t>(buffer.size()) < size) buffer.resize(static_cast<size_t>(size));
  return buffer.data();
}

// The block's K (or V) as the B of a product over D: ceil(nk / 32) panels of ceil(D / 2) x 32
// words, panel p holding keys [32p, 32p + 32).
uint32_t* PackKeyPanels(std::vector<uint32_t>& buffer, const AttentionTileBlock& blk,
                        const uint16_t* rows) {
  const int64_t d = blk.shape->head_dim;
  const int64_t words = (blk.nk + kNR - 1) / kNR * ((d + 1) / 2) * kNR;
  uint32_t* dst = Grown(buffer, words);
  PackPairPanels({rows, true, blk.kv_ld, true, blk.nk}, kNR, 0, blk.nk, 0, d, dst);
  return dst;
}

// The block's V as the B of P V (a product over keys): ceil(D / 32) panels of ceil(nk / 2) x 32
// words.
uint32_t* PackValuePanels(std::vector<uint32_t>& buffer, const AttentionTileBlock& blk) {
  const int64_t d = blk.shape->head_dim;
  const int64_t words = (d + kNR - 1) / kNR * ((blk.nk + 1) / 2) * kNR;
  uint32_t* dst = Grown(buffer, words);
  PackPairPanels({blk.v, true, blk.kv_ld, false, d}, kNR, 0, d, 0, blk.nk, dst);
  return dst;
}

// The columns [first, last) that hold the visible runs of a strip's rows r0 .. r0 + mr - 1 (the
// runs move right with the row: the first row's start, the last row's end).
void StripColumns(const AttentionTileBlock& blk, int64_t r0, int64_t mr, int64_t* first,
                  int64_t* last) {
  int64_t unused;
  VisibleRun(*blk.shape, blk.i0, r0, blk.lo, blk.nk, first, &unused);
  VisibleRun(*blk.shape, blk.i0, r0 + mr - 1, blk.lo, blk.nk, &unused, last);
  *last = std::max(*first, *last);
}

// ---- forward ----------------------------------------------------------------------------------

// out[c] = bf16(x[c] * scale), c < n (fast_attention.cc's ScaleToBf16, the bits by vcvtneps2bf16).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) void ScaleRoundBf16(
    const float* x, float scale, int64_t n, uint16_t* out) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 k = TailMask(n - c);
    StoreF32x16Native(out + c, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + c), vscale));
  }
}

// Softmax of one strip row: `row` holds the scores (times x_scale: the raw dot products when 1 /
// scale has not been applied) visible in [c0, end); prow[p0, p1) gets bf16 P (zeros outside the
// run). Returns the row's lse (-inf: nothing seen and no sink, P all zeros). The general tile's
// operations in its order.
float SoftmaxRow(float* row, int64_t c0, int64_t end, float x_scale, float sink, uint16_t* prow,
                 int64_t p0, int64_t p1) {
  const float raw_max = MaxOf(row + c0, end - c0, kNegInf);
  const float max_score = std::max(sink, raw_max == kNegInf ? kNegInf : x_scale * raw_max);
  if (max_score == kNegInf) {
    std::fill(prow + p0, prow + p1, uint16_t{0});
    return kNegInf;
  }
  const double denom = ExpOfScaled(row + c0, x_scale, max_score, end - c0, row + c0) +
                       (sink == kNegInf ? 0.0 : std::exp(double{sink} - max_score));
  std::fill(prow + p0, prow + c0, uint16_t{0});
  ScaleRoundBf16(row + c0, static_cast<float>(1.0 / denom), end - c0, prow + c0);
  std::fill(prow + end, prow + p1, uint16_t{0});
  return static_cast<float>(max_score + std::log(denom));
}

// Zeros row r of the block's O.
void ZeroOutRow(const AttentionTileOut& out, int64_t r, int64_t d) {
  const size_t size = out.bf16 ? sizeof(uint16_t) : sizeof(float);
  std::memset(static_cast<char*>(out.data) + r * out.ld * static_cast<int64_t>(size), 0,
              static_cast<size_t>(d) * size);
}

// O rows [r0, r0 + mr) = P (the strip's bf16 rows, steps [p0, p1)) @ V, by 32-dim panels.
void StripTimesValues(const AttentionTileBlock& blk, const uint16_t* probs, const uint32_t* values,
                      int64_t r0, int64_t mr, int64_t p0, int64_t p1, const AttentionTileOut& out) {
  const int64_t d = blk.shape->head_dim, steps = (blk.nk + 1) / 2;
  const Bf16Rows rows{probs + p0, 2 * blk.nk, 4, mr};
  for (int64_t j = 0; j < d; j += kNR) {
    const int64_t nr = std::min(kNR, d - j);
    const uint32_t* panel = values + (j / kNR) * steps * kNR + p0 / 2 * kNR;
    if (out.bf16) {
      const Bf16TileOut round_to{static_cast<uint16_t*>(out.data) + r0 * out.ld + j, out.ld};
      MicroKernelAvx512Bf16(p1 - p0, rows, panel, {nullptr, 0, mr, nr, 0.0f, true}, &round_to);
    } else {
      float* c = static_cast<float*>(out.data) + r0 * out.ld + j;
      MicroKernelAvx512Bf16(p1 - p0, rows, panel, {c, out.ld, mr, nr, 0.0f, true}, nullptr);
    }
  }
}

// One strip of the forward: rows [r0, r0 + mr) of the block.
void ForwardStrip(AttentionTileScratch& scratch, const AttentionTileBlock& blk,
                  const uint32_t* keys, const uint32_t* values, int64_t r0, int64_t mr, float sink,
                  const AttentionTileOut& out, float* lse_b) {
  const AttentionShape& s = *blk.shape;
  const int64_t nk = blk.nk, d = s.head_dim, i0 = blk.i0 + r0;
  int64_t first, last;
  StripColumns(blk, r0, mr, &first, &last);
  float* scores = scratch.scores.data();  // (mr, nk): S, valid inside each row's run
  const Bf16Rows q_rows{blk.q + r0 * blk.q_ld, 2 * blk.q_ld, 4, mr};
  for (int64_t j = first / kNR * kNR; j < last; j += kNR) {
    const uint32_t* panel = keys + (j / kNR) * ((d + 1) / 2) * kNR;
    MicroKernelAvx512Bf16(d, q_rows, panel, {scores + j, nk, mr, std::min(kNR, nk - j), 0.0f, true},
                          nullptr);
  }
  // Across segments the scores are masked and scaled here; else the exponentials scale them.
  const bool masked = !OneSegment(s, blk.q_segments, blk.kv_segments, blk.b, i0, i0 + mr,
                                  blk.lo + first, blk.lo + last);
  if (masked) MaskAndScale(s, blk.b, i0, mr, blk.lo, nk, blk.q_segments, blk.kv_segments, scores);
  const float x_scale = masked ? 1.0f : s.scale;
  const int64_t p0 = first / 2 * 2, p1 = std::min(nk, (last + 1) / 2 * 2);
  uint16_t* probs = scratch.probs.data();
  bool empty[kMR] = {};
  for (int64_t r = 0; r < mr; ++r) {
    int64_t c0, end;
    VisibleRun(s, i0, r, blk.lo, nk, &c0, &end);
    const float lse = SoftmaxRow(scores + r * nk, c0, end, x_scale, sink, probs + r * nk, p0, p1);
    empty[r] = lse == kNegInf;
    if (lse_b != nullptr) lse_b[r0 + r] = lse;
  }
  if (p1 > p0) StripTimesValues(blk, probs, values, r0, mr, p0, p1, out);
  for (int64_t r = 0; r < mr; ++r) {
    if (empty[r] || p1 <= p0) ZeroOutRow(out, r0 + r, d);
  }
}

// ---- backward ---------------------------------------------------------------------------------

// acc (8 x 32) = sum over kc steps of row r's bf16 pairs (row r at a + r * ld; rows past `rows`
// read row 0) times a 32-lane pair panel: the micro-kernel's vdpbf16ps sums, in K order.
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"), always_inline)) inline void DotTile(
    const uint16_t* a, int64_t ld, int64_t rows, const uint32_t* panel, int64_t kc,
    __m512 (&acc)[kMR][2]) {
  const uint16_t* row[kMR];
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r) {
    acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    row[r] = a + (r < rows ? r : 0) * ld;
  }
  const int64_t pairs = kc / 2;
  for (int64_t q = 0; q < pairs; ++q, panel += kNR) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(panel);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(panel + 16);
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      int32_t pair;
      std::memcpy(&pair, row[r] + 2 * q, sizeof pair);
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(pair);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
  }
  if (kc % 2 == 0) return;
  const __m512bh b0 = (__m512bh)_mm512_loadu_si512(panel);  // the pad step: low halves alone
  const __m512bh b1 = (__m512bh)_mm512_loadu_si512(panel + 16);
  for (int r = 0; r < kMR; ++r) {
    const __m512bh ar = (__m512bh)_mm512_set1_epi32(row[r][2 * pairs]);
    acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
    acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
  }
}

// The lanes of 16 columns from `base` that a row sees: inside its run [c0, c1) and, with
// segments (keys: the block's key segments, null: none), in its segment `id`.
__attribute__((target("avx512f"), always_inline)) inline __mmask16 VisibleLanes(
    int64_t base, int64_t c0, int64_t c1, const int32_t* keys, int32_t id) {
  const int64_t from = std::clamp<int64_t>(c0 - base, 0, 16);
  const int64_t to = std::clamp<int64_t>(c1 - base, 0, 16);
  __mmask16 lanes = static_cast<__mmask16>(((1u << to) - 1u) & ~((1u << from) - 1u));
  if (keys != nullptr && lanes != 0) {
    const __m512i ids = _mm512_maskz_loadu_epi32(lanes, keys + base);
    lanes = _mm512_mask_cmpeq_epi32_mask(lanes, ids, _mm512_set1_epi32(id));
  }
  return lanes;
}

// One strip's rows as the backward tile reads them.
struct StripRows {
  int64_t r0, mr;
  int64_t c0[kMR], c1[kMR];  // visible runs
  int32_t id[kMR];           // segments (when the block has them)
  float lse[kMR], delta[kMR];
};

// Where a backward tile's results go (attention_tile.h's AttentionGrads, with the panels' shape).
struct GradOut {
  uint16_t* ds;    // row-major dS, or null
  uint32_t* ds_t;  // dS^T panels, or null (then p_t too)
  uint32_t* p_t;   // P^T panels
  int64_t steps;   // words per panel lane: ceil(nq / 2)
  int64_t panels;  // ceil(nk / 8)
};

// Queries 2t and 2t + 1 (odd: zeros past the block) of 16 keys from `key` as pair words, into
// their two 8-key panels of the transposed layout (the second only when the block has it).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"), always_inline)) inline void
StorePairs(__m512 even, __m512 odd, uint32_t* panels, int64_t key, int64_t pair,
           const GradOut& out) {
  const __m512i low = _mm512_cvtepu16_epi32(RoundToBf16x16Native(even));
  const __m512i high = _mm512_slli_epi32(_mm512_cvtepu16_epi32(RoundToBf16x16Native(odd)), 16);
  const __m512i words = _mm512_or_si512(low, high);
  const int64_t panel = key / kAttentionPanelRows;
  uint32_t* at = panels + (panel * out.steps + pair) * kAttentionPanelRows;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), _mm512_castsi512_si256(words));
  if (panel + 1 < out.panels) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(at + out.steps * kAttentionPanelRows),
                        _mm512_extracti64x4_epi64(words, 1));
  }
}

// P and dS of the strip's columns [j, j + 32) (a whole or ragged panel of keys). `tile` holds
// two aligned 8 x 32 fp32 tiles (P, then dS).
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl,avx512dq,fma"))) void GradTile(
    const AttentionTileBlock& blk, const StripRows& strip, const uint16_t* dout,
    const uint32_t* key_panel, const uint32_t* value_panel, int64_t j, const int32_t* keys,
    float* tile, const GradOut& out) {
  const int64_t d = blk.shape->head_dim, nk = blk.nk, mr = strip.mr;
  const __m512 scale = _mm512_set1_ps(blk.shape->scale);
  const __mmask16 in_block[2] = {TailMask(nk - j), TailMask(std::max<int64_t>(0, nk - j - 16))};
  float* tile_p = tile;
  float* tile_ds = tile + kMR * kNR;
  __mmask16 visible[kMR][2];
  __m512 acc[kMR][2];
  DotTile(blk.q + strip.r0 * blk.q_ld, blk.q_ld, mr, key_panel, d, acc);
  for (int64_t r = 0; r < mr; ++r) {
    const __m512 lse = _mm512_set1_ps(strip.lse[r]);
    for (int h = 0; h < 2; ++h) {
      visible[r][h] = strip.lse[r] == kNegInf
                          ? __mmask16{0}
                          : VisibleLanes(j + 16 * h, strip.c0[r], strip.c1[r], keys, strip.id[r]);
      const __m512 x = _mm512_sub_ps(_mm512_mul_ps(scale, acc[r][h]), lse);
      _mm512_store_ps(tile_p + r * kNR + 16 * h, _mm512_maskz_mov_ps(visible[r][h], Exp16(x)));
    }
  }
  DotTile(dout + strip.r0 * blk.q_ld, blk.q_ld, mr, value_panel, d, acc);
  for (int64_t r = 0; r < mr; ++r) {
    const __m512 delta = _mm512_set1_ps(strip.delta[r]);
    for (int h = 0; h < 2; ++h) {
      const __m512 p = _mm512_load_ps(tile_p + r * kNR + 16 * h);
      const __m512 ds = _mm512_maskz_mul_ps(
          visible[r][h], _mm512_mul_ps(p, _mm512_sub_ps(acc[r][h], delta)), scale);
      _mm512_store_ps(tile_ds + r * kNR + 16 * h, ds);
      if (out.ds != nullptr && in_block[h] != 0) {
        StoreF32x16Native(out.ds + (strip.r0 + r) * nk + j + 16 * h, in_block[h], ds);
      }
    }
  }
  if (out.ds_t == nullptr) return;
  for (int64_t t = 0; 2 * t < mr; ++t) {
    const bool odd = 2 * t + 1 < mr;
    const int64_t pair = strip.r0 / 2 + t;
    for (int h = 0; h < 2; ++h) {
      if (in_block[h] == 0) continue;
      const int64_t at = 2 * t * kNR + 16 * h;
      const __m512 zero = _mm512_setzero_ps();
      StorePairs(_mm512_load_ps(tile_p + at), odd ? _mm512_load_ps(tile_p + at + kNR) : zero,
                 out.p_t, j + 16 * h, pair, out);
      StorePairs(_mm512_load_ps(tile_ds + at), odd ? _mm512_load_ps(tile_ds + at + kNR) : zero,
                 out.ds_t, j + 16 * h, pair, out);
    }
  }
}

// Zeros columns [from, to) of the strip's rows of a bf16 (nq, nk) matrix (null: none).
void ZeroColumns(uint16_t* m, int64_t nk, int64_t r0, int64_t mr, int64_t from, int64_t to) {
  if (m == nullptr || to <= from) return;
  for (int64_t r = r0; r < r0 + mr; ++r) std::fill(m + r * nk + from, m + r * nk + to, uint16_t{0});
}

}  // namespace

bool AttentionTileRuns(GemmBf16Path path) {
  return path == GemmBf16Path::kAvx512Bf16 && AttentionGemmRuns(path);
}

void AttentionForwardTile(AttentionTileScratch& scratch, const AttentionTileBlock& blk, float sink,
                          const AttentionTileOut& out, float* lse_b) {
  const uint32_t* keys = PackKeyPanels(scratch.key_pairs, blk, blk.k);
  const uint32_t* values = PackValuePanels(scratch.value_pairs, blk);
  Grown(scratch.scores, kMR * blk.nk);
  Grown(scratch.probs, kMR * blk.nk);
  for (int64_t r0 = 0; r0 < blk.nq; r0 += kMR) {
    ForwardStrip(scratch, blk, keys, values, r0, std::min(kMR, blk.nq - r0), sink, out, lse_b);
  }
}

void AttentionProbsAndGrads(AttentionTileScratch& scratch, const AttentionTileBlock& blk,
                            const uint16_t* dout, const float* lse_b, const float* delta_b,
                            const AttentionGrads& grads) {
  const AttentionShape& s = *blk.shape;
  const int64_t d = s.head_dim, nk = blk.nk, panel_words = (d + 1) / 2 * kNR;
  const uint32_t* keys = PackKeyPanels(scratch.key_pairs, blk, blk.k);
  const uint32_t* values = PackKeyPanels(scratch.value_pairs, blk, blk.v);
  float* tile = Grown(scratch.scores, 2 * kMR * kNR + 16);  // + 16: room to align to 64 bytes
  tile += (16 - reinterpret_cast<uintptr_t>(tile) / sizeof(float) % 16) % 16;
  const GradOut out{grads.ds, grads.ds_t, grads.p_t, (blk.nq + 1) / 2,
                    (nk + kAttentionPanelRows - 1) / kAttentionPanelRows};
  const int32_t* key_ids =
      blk.kv_segments ? blk.kv_segments + blk.b * s.kv_rows() + blk.lo : nullptr;
  for (int64_t r0 = 0; r0 < blk.nq; r0 += kMR) {
    StripRows strip;
    strip.r0 = r0;
    strip.mr = std::min(kMR, blk.nq - r0);
    for (int64_t r = 0; r < strip.mr; ++r) {
      VisibleRun(s, blk.i0, r0 + r, blk.lo, nk, &strip.c0[r], &strip.c1[r]);
      strip.id[r] = blk.q_segments ? blk.q_segments[blk.b * s.q_len + blk.i0 + r0 + r] : 0;
      strip.lse[r] = lse_b[r0 + r];
      strip.delta[r] = delta_b[r0 + r];
    }
    int64_t first, last;
    StripColumns(blk, r0, strip.mr, &first, &last);
    int64_t j0 = first / kNR * kNR, j1 = std::min(nk, (last + kNR - 1) / kNR * kNR);
    if (j1 <= j0) j0 = j1 = 0;  // nothing visible: all zeros
    for (int64_t j = j0; j < j1; j += kNR) {
      GradTile(blk, strip, dout, keys + j / kNR * panel_words, values + j / kNR * panel_words, j,
               key_ids, tile, out);
    }
    // dQ's product reads every column of dS in its band; the transposed panels are read only
    // where some row of the strip sees some key of the panel: inside [j0, j1).
    ZeroColumns(grads.ds, nk, r0, strip.mr, 0, j0);
    ZeroColumns(grads.ds, nk, r0, strip.mr, j1, nk);
  }
}

}  // namespace air::engine
