// The reference's fp32 loops, one per op of engine/ops/ops.h, over raw host arrays (the sizes
// and accumulation rules are ops.h's). ReferenceOps (reference_ops.h) runs them on fp32 views of
// its arguments, widening and rounding BF16 data around them; nothing else should call them.
// Thread safety: pure functions over their arguments.
#pragma once

#include <cstdint>

#include "engine/ops/ops.h"

namespace air::engine {

void RefGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
             int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void RefEmbeddingForward(const int32_t* ids, int64_t n, const float* table, int64_t dim,
                         float* out);
void RefEmbeddingBackward(const int32_t* ids, int64_t n, const float* dout, int64_t dim,
                          int32_t skip_id, float* dtable);
void RefRmsNormForward(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                       float* y, float* rstd);
void RefRmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy,
                        int64_t rows, int64_t dim, float* dx, float* dw);
void RefRopeForward(float* x, int64_t n, int64_t heads, int64_t head_dim, const float* cos,
                    const float* sin);
void RefRopeBackward(float* dx, int64_t n, int64_t heads, int64_t head_dim, const float* cos,
                     const float* sin);
// `sinks` (Hq) and `dsinks` may be null (no sinks; no sink gradient).
void RefAttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v,
                         const float* sinks, const int32_t* q_segments, const int32_t* kv_segments,
                         float* out, float* lse);
void RefAttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v,
                          const float* sinks, const int32_t* q_segments, const int32_t* kv_segments,
                          const float* out, const float* lse, const float* dout, float* dq,
                          float* dk, float* dv, float* dsinks);
void RefSwigluForward(const float* gate, const float* up, int64_t n, float* out);
void RefSwigluBackward(const float* gate, const float* up, const float* dout, int64_t n,
                       float* dgate, float* dup);
// GPT-OSS (reference_moe_loops.cc): n = rows * I outputs of gate_up (rows, 2I).
void RefClampedSwigluForward(const float* gate_up, int64_t n, float alpha, float limit, float* out);
void RefClampedSwigluBackward(const float* gate_up, const float* dout, int64_t n, float alpha,
                              float limit, float* dgate_up);
void RefRouterTopK(const float* logits, int64_t n, int64_t experts, int64_t k, int32_t* indices,
                   float* weights);
void RefRouterTopKBackward(const int32_t* indices, const float* weights, const float* dweights,
                           int64_t n, int64_t experts, int64_t k, float* dlogits);
void RefMoeDispatch(const int32_t* indices, int64_t n, int64_t k, int64_t experts, int32_t* offsets,
                    int32_t* token_of_row, int32_t* row_of_slot);
void RefMoeGather(const float* x, const int32_t* token_of_row, int64_t rows, int64_t dim,
                  float* grouped);
void RefMoeGatherBackward(const float* dgrouped, const int32_t* row_of_slot, int64_t n, int64_t k,
                          int64_t dim, float* dx);
void RefMoeCombine(const float* y, const float* weights, const int32_t* row_of_slot, int64_t n,
                   int64_t k, int64_t dim, float* out);
void RefMoeCombineBackward(const float* y, const float* weights, const int32_t* row_of_slot,
                           const float* dout, int64_t n, int64_t k, int64_t dim, float* dy,
                           float* dweights);
// The k slots of one token in ascending grouped-row order (the order MoeCombine and
// MoeGatherBackward add them in), written to order[0, k).
void MoeSlotsByRow(const int32_t* row_of_slot_n, int64_t k, int32_t* order);
void RefAddInPlace(float* y, const float* x, int64_t n);
void RefAddBias(float* y, const float* bias, int64_t rows, int64_t cols);
void RefBiasBackward(const float* dy, int64_t rows, int64_t cols, float* dbias);
void RefCrossEntropyForward(const float* logits, const int32_t* targets, int64_t n, int64_t vocab,
                            float* lse, double* loss_sum);
void RefCrossEntropyBackward(const float* logits, const int32_t* targets, const float* lse,
                             int64_t n, int64_t vocab, float scale, float* dlogits);
void RefAdamWUpdate(const AdamWScalars& s, int64_t n, float* p, const float* g, float* m, float* v);

}  // namespace air::engine
