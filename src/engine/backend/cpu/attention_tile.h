// The fused tiles of FastOps attention on the avx512bf16 path (q, k, v BF16), hand-written for
// speed around the bf16 GEMM's 8 x 32 vdpbf16ps tile (gemm_kernels.h). fast_attention.cc's
// general tile writes a block's scores (128 queries x its keys in fp32: an L2-sized scratch) and
// passes over them several times; here no fp32 score leaves L1:
//   forward: per strip of 8 queries, S (8 x keys, fp32) from the micro-kernel, the softmax rows
//     (vec_math.h's max and exp, the general tile's order), P rounded to bf16 and O = P V by the
//     same kernel reading P in place: every output and lse gets the general tile's bits;
//   backward: per 8 x 32 tile, P = exp(scale * S - lse) and dS = P * (dP - delta) * scale from
//     the S and dP accumulators in registers, stored only rounded to bf16 as the block's dQ, dK
//     and dV products read them (dS row-major, P^T and dS^T already in the kernel's pair panels,
//     with no packing pass): the general tile's P and dS bits, but for the sign of a masked zero.
// Masks are attention_masks.h's (causal, window, segments). Every element's value depends only
// on its query and key, never on the block's extent (the backward's one-pass and two-pass splits
// rely on that). Thread safety: one call per scratch at a time (a pool task's own).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/cpu/attention_gemm.h"
#include "engine/ops/op_semantics.h"

namespace air::engine {

// Per-thread buffers of the fused tiles, grown on demand.
struct AttentionTileScratch {
  std::vector<uint32_t> key_pairs;    // K as the B of Q K^T: 32-key panels of D pair words
  std::vector<uint32_t> value_pairs;  // V: 32-dim panels over keys (P V), or as key_pairs (dO V^T)
  std::vector<float> scores;          // forward: a strip's S; backward: one tile's P and dS
  std::vector<uint16_t> probs;        // forward: a strip's P in bf16
  std::vector<uint32_t> probs_t;      // backward: P^T and dS^T in pair panels (AttentionGrads)
  std::vector<uint32_t> grads_t;
};

// Queries [i0, i0 + nq) of one query head of batch row b against keys [lo, lo + nk), nk > 0.
// Rows in place, BF16: q at query i0's row of the head, k and v at key lo's row of its KV head.
struct AttentionTileBlock {
  const AttentionShape* shape;
  int64_t b, i0, nq, lo, nk;
  const int32_t* q_segments;   // (B, Tq), or null: no segments
  const int32_t* kv_segments;  // (B, kv_rows), or null
  const uint16_t* q;
  int64_t q_ld;
  const uint16_t* k;
  const uint16_t* v;
  int64_t kv_ld;
};

// Where the forward writes O: the block's first row, F32 or BF16, row stride ld.
struct AttentionTileOut {
  void* data;
  bool bf16;
  int64_t ld;
};

// Whether the fused tiles run for a caller on `path`: it is avx512bf16 (and this CPU runs it).
bool AttentionTileRuns(GemmBf16Path path);

// O = softmax(scale * Q K^T, masked, with the sink) V for the block's rows, and lse_b[r] (null:
// not wanted); sink -inf: none. A row that sees nothing and has no sink gets zeros and -inf.
void AttentionForwardTile(AttentionTileScratch& scratch, const AttentionTileBlock& blk, float sink,
                          const AttentionTileOut& out, float* lse_b);

// Where the backward's P and dS of a block go, bf16, zeros where masked; each null: not wanted
// (p_t and ds_t together). Panels: AttentionGemmBf16PackedA's A (attention_gemm.h) with m = nk
// keys and k = nq queries, ceil(nk / 8) x ceil(nq / 2) x 8 words: the A of dK += dS^T Q and
// dV += P^T dO; only the words those banded products read are written.
struct AttentionGrads {
  uint16_t* ds;    // dS, nq x nk, row stride nk (the A of dQ += dS K, read in place)
  uint32_t* ds_t;  // dS^T in pair panels
  uint32_t* p_t;   // P^T in pair panels
};

// The words of each of AttentionGrads' panel buffers for a block.
inline int64_t AttentionPanelWords(int64_t nq, int64_t nk) {
  return (nk + kAttentionPanelRows - 1) / kAttentionPanelRows * ((nq + 1) / 2) *
         kAttentionPanelRows;
}

// The backward's P = exp(scale * S - lse_b[r]) (0 where lse_b[r] is -inf) and
// dS = P * (dO_r . V - delta_b[r]) * scale of the block, into `grads`. dout (BF16) at query i0's
// row, stride q_ld.
void AttentionProbsAndGrads(AttentionTileScratch& scratch, const AttentionTileBlock& blk,
                            const uint16_t* dout, const float* lse_b, const float* delta_b,
                            const AttentionGrads& grads);

}  // namespace air::engine
