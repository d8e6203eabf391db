// CudaBackend's kernel hooks (ops.h's AIR_OPS_KERNELS): each unpacks the Views its public op has
// checked into device pointers, dtypes and the sizes the CPU reference derives from them
// (backend/cpu/reference_ops.cc), and queues the op's launcher (cuda_kernels.h) or cuBLASLt
// GEMM (cuda_gemm.h) on the backend's stream. Nothing here waits for the GPU.
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/ops/op_sizes.h"

namespace air::engine::cuda {

namespace {

In Arg(const View& v) { return In{v.empty() ? nullptr : v.raw(), v.dtype()}; }
Out Res(const View& v) { return Out{v.empty() ? nullptr : v.raw(), v.dtype()}; }
float* F32(const View& v) { return v.empty() ? nullptr : v.f32(); }
const int32_t* I32(const View& v) { return v.empty() ? nullptr : v.i32(); }
int32_t* I32Out(const View& v) { return v.empty() ? nullptr : v.i32(); }

}  // namespace

void CudaBackend::GemmKernel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                             const View& a, int64_t lda, const View& b, int64_t ldb, float beta,
                             const View& c, int64_t ldc) const {
  Activate();
  gemm_->Run(GemmCall{.trans_a = trans_a,
                      .trans_b = trans_b,
                      .m = m,
                      .n = n,
                      .k = k,
                      .a = Arg(a),
                      .b = Arg(b),
                      .lda = lda,
                      .ldb = ldb,
                      .beta = beta,
                      .c = Res(c),
                      .ldc = ldc});
}

void CudaBackend::EmbeddingForwardKernel(const View& ids, const View& table,
                                         const View& out) const {
  Activate();
  cuda::EmbeddingForward(I32(ids), ids.numel(), Arg(table), table.dim(-1), Res(out), stream_);
}

void CudaBackend::EmbeddingBackwardKernel(const View& ids, const View& dout, int32_t skip_id,
                                          const View& dtable) const {
  Activate();
  cuda::EmbeddingBackward(I32(ids), ids.numel(), Arg(dout), dtable.dim(-1), skip_id, Res(dtable),
                          stream_);
}

void CudaBackend::RmsNormForwardKernel(const View& x, const View& w, float eps, const View& y,
                                       const View& rstd) const {
  Activate();
  const int64_t dim = w.numel(), rows = dim > 0 ? x.numel() / dim : 0;
  cuda::RmsNormForward(Arg(x), Arg(w), rows, dim, eps, Res(y), F32(rstd), stream_);
}

void CudaBackend::RmsNormBackwardKernel(const View& x, const View& w, const View& rstd,
                                        const View& dy, const View& dx, const View& dw) const {
  Activate();
  const int64_t dim = w.numel(), rows = dim > 0 ? x.numel() / dim : 0;
  cuda::RmsNormBackward(Arg(x), Arg(w), F32(rstd), Arg(dy), rows, dim, Res(dx), Res(dw), stream_);
}

void CudaBackend::RopeTablesKernel(const View& positions, const View& inv_freq, float scale,
                                   const View& cos, const View& sin) const {
  Activate();
  cuda::RopeTables(I32(positions), positions.numel(), F32(inv_freq), inv_freq.numel(), scale,
                   F32(cos), F32(sin), stream_);
}

void CudaBackend::RopeForwardKernel(const View& x, const View& cos, const View& sin) const {
  Activate();
  const RopeDims d = RopeShape(x, cos);
  cuda::Rope(Res(x), d.n, d.heads, d.head_dim, F32(cos), F32(sin), /*backward=*/false, stream_);
}

void CudaBackend::RopeBackwardKernel(const View& dx, const View& cos, const View& sin) const {
  Activate();
  const RopeDims d = RopeShape(dx, cos);
  cuda::Rope(Res(dx), d.n, d.heads, d.head_dim, F32(cos), F32(sin), /*backward=*/true, stream_);
}

void CudaBackend::AttentionForwardKernel(const AttentionShape& s, const View& q, const View& k,
                                         const View& v, const View& sinks, const View& q_segments,
                                         const View& kv_segments, const View& out,
                                         const View& lse) const {
  Activate();
  cuda::AttentionForward(s, Arg(q), Arg(k), Arg(v), Arg(sinks), I32(q_segments), I32(kv_segments),
                         Res(out), F32(lse), stream_);
}

void CudaBackend::AttentionBackwardKernel(const AttentionShape& s, const View& q, const View& k,
                                          const View& v, const View& sinks, const View& q_segments,
                                          const View& kv_segments, const View& out, const View& lse,
                                          const View& dout, const View& dq, const View& dk,
                                          const View& dv, const View& dsinks) const {
  Activate();
  cuda::AttentionBackward(s, Arg(q), Arg(k), Arg(v), Arg(sinks), I32(q_segments), I32(kv_segments),
                          Arg(out), F32(lse), Arg(dout), Res(dq), Res(dk), Res(dv), Res(dsinks),
                          stream_);
}

void CudaBackend::SwigluForwardKernel(const View& gate, const View& up, const View& out) const {
  Activate();
  cuda::SwigluForward(Arg(gate), Arg(up), Res(out), gate.numel(), stream_);
}

void CudaBackend::SwigluBackwardKernel(const View& gate, const View& up, const View& dout,
                                       const View& dgate, const View& dup) const {
  Activate();
  cuda::SwigluBackward(Arg(gate), Arg(up), Arg(dout), Res(dgate), Res(dup), gate.numel(), stream_);
}

void CudaBackend::ClampedSwigluForwardKernel(const View& gate_up, float alpha, float limit,
                                             const View& out) const {
  Activate();
  const int64_t inter = out.shape().empty() ? out.numel() : out.dim(-1);
  const int64_t rows = inter > 0 ? out.numel() / inter : 0;
  cuda::ClampedSwigluForward(Arg(gate_up), rows, inter, alpha, limit, Res(out), stream_);
}

void CudaBackend::ClampedSwigluBackwardKernel(const View& gate_up, float alpha, float limit,
                                              const View& dout, const View& dgate_up) const {
  Activate();
  const int64_t inter = dout.shape().empty() ? dout.numel() : dout.dim(-1);
  const int64_t rows = inter > 0 ? dout.numel() / inter : 0;
  cuda::ClampedSwigluBackward(Arg(gate_up), rows, inter, alpha, limit, Arg(dout), Res(dgate_up),
                              stream_);
}

void CudaBackend::RouterTopKKernel(const View& logits, const View& indices,
                                   const View& weights) const {
  Activate();
  const int64_t k = TopK(indices), n = indices.numel() / k;
  const int64_t experts = n > 0 ? logits.numel() / n : 0;
  cuda::RouterTopK(Arg(logits), n, experts, k, I32Out(indices), F32(weights), stream_);
}

void CudaBackend::RouterTopKBackwardKernel(const View& indices, const View& weights,
                                           const View& dweights, const View& dlogits) const {
  Activate();
  const int64_t k = TopK(indices), n = indices.numel() / k;
  const int64_t experts = n > 0 ? dlogits.numel() / n : 0;
  cuda::RouterTopKBackward(I32(indices), F32(weights), F32(dweights), n, experts, k, Res(dlogits),
                           stream_);
}

void CudaBackend::MoeDispatchKernel(const View& indices, const View& offsets,
                                    const View& token_of_row, const View& row_of_slot) const {
  Activate();
  const int64_t k = TopK(indices), n = indices.numel() / k;
  cuda::MoeDispatch(I32(indices), n, k, offsets.numel() - 1, I32Out(offsets), I32Out(token_of_row),
                    I32Out(row_of_slot), stream_);
}

void CudaBackend::MoeGatherKernel(const View& x, const View& token_of_row,
                                  const View& grouped) const {
  Activate();
  const int64_t rows = token_of_row.numel(), dim = rows > 0 ? grouped.numel() / rows : 0;
  cuda::MoeGather(Arg(x), I32(token_of_row), rows, dim, Res(grouped), stream_);
}

void CudaBackend::MoeGatherBackwardKernel(const View& dgrouped, const View& row_of_slot,
                                          const View& dx) const {
  Activate();
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? dx.numel() / n : 0;
  cuda::MoeGatherBackward(Arg(dgrouped), I32(row_of_slot), n, k, dim, Res(dx), stream_);
}

void CudaBackend::MoeCombineKernel(const View& y, const View& weights, const View& row_of_slot,
                                   const View& out) const {
  Activate();
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? out.numel() / n : 0;
  cuda::MoeCombine(Arg(y), F32(weights), I32(row_of_slot), n, k, dim, Res(out), stream_);
}

void CudaBackend::MoeCombineBackwardKernel(const View& y, const View& weights,
                                           const View& row_of_slot, const View& dout,
                                           const View& dy, const View& dweights) const {
  Activate();
  const int64_t k = TopK(row_of_slot), n = row_of_slot.numel() / k;
  const int64_t dim = n > 0 ? dout.numel() / n : 0;
  cuda::MoeCombineBackward(Arg(y), F32(weights), I32(row_of_slot), Arg(dout), n, k, dim, Res(dy),
                           F32(dweights), stream_);
}

void CudaBackend::GroupedGemmKernel(bool trans_w, int64_t n, int64_t k, const View& x,
                                    const View& w, const View& bias, const View& offsets,
                                    float beta, const View& y) const {
  Activate();
  const int64_t rows = k > 0 ? x.numel() / k : (n > 0 ? y.numel() / n : 0);
  cuda::GroupedGemm(trans_w, rows, n, k, Arg(x), Arg(w), Arg(bias), I32(offsets),
                    offsets.numel() - 1, beta, Res(y), stream_);
}

void CudaBackend::GroupedGemmWeightGradKernel(int64_t k, int64_t n, const View& x, const View& dy,
                                              const View& offsets, const View& dw,
                                              const View& dbias) const {
  Activate();
  const int64_t rows = n > 0 ? dy.numel() / n : 0;
  cuda::GroupedGemmWeightGrad(rows, k, n, Arg(x), Arg(dy), I32(offsets), offsets.numel() - 1,
                              Res(dw), Res(dbias), stream_);
}

void CudaBackend::DequantizeMxfp4Kernel(int64_t experts, int64_t rows, int64_t groups,
                                        const View& blocks, const View& scales,
                                        const View& out) const {
  Activate();
  cuda::DequantizeMxfp4(experts, rows, groups, static_cast<const uint8_t*>(blocks.raw()),
                        static_cast<const uint8_t*>(scales.raw()), Res(out), stream_);
}

void CudaBackend::AddInPlaceKernel(const View& y, const View& x) const {
  Activate();
  cuda::AddInPlace(Res(y), Arg(x), y.numel(), stream_);
}

void CudaBackend::AddBiasKernel(const View& y, const View& bias) const {
  Activate();
  const int64_t cols = bias.numel(), rows = cols > 0 ? y.numel() / cols : 0;
  cuda::AddBias(Res(y), Arg(bias), rows, cols, stream_);
}

void CudaBackend::BiasBackwardKernel(const View& dy, const View& dbias) const {
  Activate();
  const int64_t cols = dbias.numel(), rows = cols > 0 ? dy.numel() / cols : 0;
  cuda::BiasBackward(Arg(dy), rows, cols, Res(dbias), stream_);
}

void CudaBackend::ConvertKernel(const View& src, const View& dst) const {
  Activate();
  cuda::Convert(Arg(src), Res(dst), dst.numel(), stream_);
}

void CudaBackend::DropoutKernel(const View& x, float p, uint64_t seed, const View& out) const {
  Activate();
  cuda::Dropout(Arg(x), p, seed, Res(out), x.numel(), stream_);
}

void CudaBackend::DropoutMaskKernel(int64_t n, float p, uint64_t seed, const View& bits) const {
  Activate();
  cuda::DropoutMask(n, p, seed, static_cast<uint8_t*>(bits.raw()), stream_);
}

void CudaBackend::ApplyDropoutMaskKernel(const View& x, const View& bits, float p, float beta,
                                         const View& out) const {
  Activate();
  cuda::ApplyDropoutMask(Arg(x), static_cast<const uint8_t*>(bits.raw()), p, beta != 0.0f, Res(out),
                         x.numel(), stream_);
}

// Not fused yet: the dropped operand written into scratch, then the cuBLASLt product.
void CudaBackend::GemmDroppedKernel(bool drop_b, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                    int64_t k, const View& a, int64_t lda, const View& b,
                                    int64_t ldb, float beta, const View& c, int64_t ldc,
                                    const View& bits, float p, const View& scratch) const {
  GemmDroppedThroughScratch(drop_b, trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, bits,
                            p, scratch);
}

void CudaBackend::GemmAddDroppedKernel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                       const View& a, int64_t lda, const View& b, int64_t ldb,
                                       const View& c, const View& bits, float p,
                                       const View& scratch) const {
  GemmAddDroppedThroughScratch(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, bits, p, scratch);
}

// GemmPackedBBytes is 0 here: the ops' checks refuse every call before it reaches these.
void CudaBackend::PackGemmBKernel(bool, int64_t, int64_t, const View&, int64_t, const View&) const {
  RefusePackedB(OpKind::kPackGemmB);
}

void CudaBackend::GemmPackedBKernel(int64_t, int64_t, int64_t, const View&, int64_t, const View&,
                                    float, const View&, int64_t) const {
  RefusePackedB(OpKind::kGemmPackedB);
}

void CudaBackend::DroppedLinearBackwardKernel(int64_t n, int64_t r, int64_t in, const View& x,
                                              const View& bits, float p, const View& w,
                                              const View& dy, float beta, const View& w_grad,
                                              const View& dx, const View& x_scratch,
                                              const View& f32_scratch) const {
  DroppedLinearBackwardInTwo(n, r, in, x, bits, p, w, dy, beta, w_grad, dx, x_scratch, f32_scratch);
}

void CudaBackend::GemmConcatKKernel(bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                                    int64_t lda, const View& b, int64_t ldb, int64_t k2,
                                    const View& a2, int64_t lda2, const View& b2, int64_t ldb2,
                                    const View& c, const View& scratch) const {
  GemmConcatKInTwo(trans_b, m, n, k, a, lda, b, ldb, k2, a2, lda2, b2, ldb2, c, scratch);
}

void CudaBackend::CrossEntropyForwardKernel(const View& logits, const View& targets,
                                            const View& lse, const View& loss_sum) const {
  Activate();
  const int64_t n = targets.numel(), vocab = n > 0 ? logits.numel() / n : 0;
  cuda::CrossEntropyForward(Arg(logits), I32(targets), n, vocab, F32(lse), loss_sum.f64(), stream_);
}

void CudaBackend::CrossEntropyBackwardKernel(const View& logits, const View& targets,
                                             const View& lse, float scale,
                                             const View& dlogits) const {
  Activate();
  const int64_t n = targets.numel(), vocab = n > 0 ? logits.numel() / n : 0;
  cuda::CrossEntropyBackward(Arg(logits), I32(targets), F32(lse), n, vocab, scale, Res(dlogits),
                             stream_);
}

void CudaBackend::AdamWUpdateKernel(const AdamWScalars& s, const View& p, const View& g,
                                    const View& m, const View& v, const View& p_copy) const {
  Activate();
  cuda::AdamWUpdate(s, Res(p), Arg(g), Res(m), Res(v), Res(p_copy), p.numel(), stream_);
}

void CudaBackend::SumOfSquaresKernel(const View& x, const View& sum) const {
  Activate();
  cuda::SumOfSquares(Arg(x), x.numel(), sum.f64(), stream_);
}

void CudaBackend::ScaleKernel(const View& x, float factor) const {
  Activate();
  cuda::Scale(Res(x), x.numel(), factor, stream_);
}

}  // namespace air::engine::cuda
