// ReferenceOps: every op as its fp32 loop (reference_loops.cc) on fp32 staging of its views —
// BF16 inputs widened exactly, BF16 outputs rounded once (see reference_ops.h).
#include "engine/ops/cpu/reference_ops.h"

#include <cmath>
#include <optional>
#include <vector>

#include "engine/dtype.h"
#include "engine/ops/cpu/convert.h"
#include "engine/ops/cpu/reference_loops.h"
#include "engine/ops/op_checks.h"

namespace air::engine {

bool IsMasterStateOp(OpKind op) {
  return op == OpKind::kAdamWUpdate || op == OpKind::kSumOfSquares || op == OpKind::kScale;
}

bool ReferenceOps::Supports(OpKind op, DType dtype) const {
  if (dtype == DType::kF32) return true;
  return dtype == DType::kBF16 && !IsMasterStateOp(op);
}

void RopeAngle(int32_t position, float inv_freq, float scale, float* cos_out, float* sin_out) {
  const float angle = static_cast<float>(position) * inv_freq;     // fp32 product, as torch
  *cos_out = static_cast<float>(std::cos(double{angle})) * scale;  // fp32 product, as torch
  *sin_out = static_cast<float>(std::sin(double{angle})) * scale;
}

namespace {

// An operand of a bf16 GEMM: widened when BF16; an F32 operand rounded to bf16 and widened
// back, since the other operand's dtype makes the whole product bf16 (ops.h).
std::vector<float> Bf16Operand(const View& v, int64_t elements) {
  std::vector<float> out(static_cast<size_t>(elements));
  LoadF32(v, 0, elements, out.data());
  if (v.dtype() == DType::kF32) {
    for (float& x : out) x = Bf16ToF32(F32ToBf16(x));
  }
  return out;
}

const int32_t* IndexOrNull(const View& v) { return v.empty() ? nullptr : v.i32(); }

}  // namespace

void ReferenceOps::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                        int64_t lda, const View& b, int64_t ldb, float beta, const View& c,
                        int64_t ldc) const {
  const OpKind op = OpKind::kGemm;
  CheckData(*this, op, c, "c");
  const int64_t a_span = trans_a ? MatrixSpan(k, m, lda) : MatrixSpan(m, k, lda);
  const int64_t b_span = trans_b ? MatrixSpan(n, k, ldb) : MatrixSpan(k, n, ldb);
  CheckSize(op, c, MatrixSpan(m, n, ldc), "c");
  if (k > 0) {
    CheckData(*this, op, a, "a");
    CheckData(*this, op, b, "b");
    CheckSize(op, a, a_span, "a");
    CheckSize(op, b, b_span, "b");
  }
  std::vector<float> a32, b32;
  if (k > 0 && (a.dtype() == DType::kBF16 || b.dtype() == DType::kBF16)) {
    a32 = Bf16Operand(a, a_span);
    b32 = Bf16Operand(b, b_span);
  } else if (k > 0) {
    a32.resize(static_cast<size_t>(a_span));
    b32.resize(static_cast<size_t>(b_span));
    LoadF32(a, 0, a_span, a32.data());
    LoadF32(b, 0, b_span, b32.data());
  }
  // Only C's addressed elements are staged (a strided C keeps what lies between its rows).
  F32Output c32(c.Slice(0, MatrixSpan(m, n, ldc)), /*load=*/true);
  RefGemm(trans_a, trans_b, m, n, k, a32.data(), lda, b32.data(), ldb, beta, c32.get(), ldc);
  c32.Store();
}

void ReferenceOps::EmbeddingForward(const View& ids, const View& table, const View& out) const {
  const OpKind op = OpKind::kEmbeddingForward;
  CheckIndex(op, ids, "ids");
  CheckData(*this, op, table, "table");
  CheckData(*this, op, out, "out");
  const int64_t n = ids.numel(), dim = table.dim(-1);
  CheckSize(op, out, n * dim, "out");
  F32Input t(table);
  F32Output o(out, false);
  RefEmbeddingForward(ids.i32(), n, t.get(), dim, o.get());
  o.Store();
}

void ReferenceOps::EmbeddingBackward(const View& ids, const View& dout, int32_t skip_id,
                                     const View& dtable) const {
  const OpKind op = OpKind::kEmbeddingBackward;
  CheckIndex(op, ids, "ids");
  CheckData(*this, op, dout, "dout");
  CheckF32(op, dtable, "dtable");
  const int64_t n = ids.numel(), dim = dtable.dim(-1);
  CheckSize(op, dout, n * dim, "dout");
  F32Input d(dout);
  RefEmbeddingBackward(ids.i32(), n, d.get(), dim, skip_id, dtable.f32());
}

void ReferenceOps::RmsNormForward(const View& x, const View& w, float eps, const View& y,
                                  const View& rstd) const {
  const OpKind op = OpKind::kRmsNormForward;
  CheckData(*this, op, x, "x");
  CheckData(*this, op, w, "w");
  CheckData(*this, op, y, "y");
  CheckF32(op, rstd, "rstd");
  const int64_t dim = w.numel(), rows = x.numel() / dim;
  CheckSameSize(op, x, y, "x, y");
  CheckSize(op, rstd, rows, "rstd");
  F32Input xs(x), ws(w);
  F32Output ys(y, false);
  RefRmsNormForward(xs.get(), ws.get(), rows, dim, eps, ys.get(), rstd.f32());
  ys.Store();
}

void ReferenceOps::RmsNormBackward(const View& x, const View& w, const View& rstd, const View& dy,
                                   const View& dx, const View& dw) const {
  const OpKind op = OpKind::kRmsNormBackward;
  CheckData(*this, op, x, "x");
  CheckData(*this, op, w, "w");
  CheckData(*this, op, dy, "dy");
  CheckData(*this, op, dx, "dx");
  CheckF32(op, rstd, "rstd");
  CheckF32(op, dw, "dw");
  const int64_t dim = w.numel(), rows = x.numel() / dim;
  CheckSameSize(op, x, dy, "x, dy");
  CheckSameSize(op, x, dx, "x, dx");
  CheckSize(op, rstd, rows, "rstd");
  if (!dw.empty()) CheckSize(op, dw, dim, "dw");
  F32Input xs(x), ws(w), dys(dy);
  F32Output dxs(dx, true);
  RefRmsNormBackward(xs.get(), ws.get(), rstd.f32(), dys.get(), rows, dim, dxs.get(),
                     dw.empty() ? nullptr : dw.f32());
  dxs.Store();
}

void ReferenceOps::RopeTables(const View& positions, const View& inv_freq, float scale,
                              const View& cos, const View& sin) const {
  const OpKind op = OpKind::kRopeTables;
  CheckIndex(op, positions, "positions");
  CheckF32(op, inv_freq, "inv_freq");
  CheckF32(op, cos, "cos");
  CheckF32(op, sin, "sin");
  const int64_t n = positions.numel(), half = inv_freq.numel();
  CheckSize(op, cos, n * half, "cos");
  CheckSize(op, sin, n * half, "sin");
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      RopeAngle(positions.i32()[t], inv_freq.f32()[i], scale, &cos.f32()[t * half + i],
                &sin.f32()[t * half + i]);
    }
  }
}

namespace {

// N and heads of a RoPE call: the tables are (N, D/2), x is (N, H, D).
struct RopeDims {
  int64_t n, heads, head_dim;
};

RopeDims RopeShape(OpKind op, const View& x, const View& cos, const View& sin) {
  CheckF32(op, cos, "cos");
  CheckF32(op, sin, "sin");
  CheckSameSize(op, cos, sin, "cos, sin");
  const int64_t n = cos.dim(0), head_dim = 2 * cos.dim(-1);
  const int64_t heads = n > 0 ? x.numel() / (n * head_dim) : 0;
  CheckSize(op, x, n * heads * head_dim, "x");
  return {n, heads, head_dim};
}

}  // namespace

void ReferenceOps::RopeForward(const View& x, const View& cos, const View& sin) const {
  CheckData(*this, OpKind::kRopeForward, x, "x");
  const RopeDims d = RopeShape(OpKind::kRopeForward, x, cos, sin);
  F32Output xs(x, true);
  RefRopeForward(xs.get(), d.n, d.heads, d.head_dim, cos.f32(), sin.f32());
  xs.Store();
}

void ReferenceOps::RopeBackward(const View& dx, const View& cos, const View& sin) const {
  CheckData(*this, OpKind::kRopeBackward, dx, "dx");
  const RopeDims d = RopeShape(OpKind::kRopeBackward, dx, cos, sin);
  F32Output xs(dx, true);
  RefRopeBackward(xs.get(), d.n, d.heads, d.head_dim, cos.f32(), sin.f32());
  xs.Store();
}

namespace {

void CheckAttention(const Ops& ops, OpKind op, const AttentionShape& s, const View& q,
                    const View& k, const View& v, const View& sinks, const View& q_segments,
                    const View& kv_segments) {
  CheckData(ops, op, q, "q");
  CheckData(ops, op, k, "k");
  CheckData(ops, op, v, "v");
  if (!sinks.empty()) {
    CheckData(ops, op, sinks, "sinks");
    CheckSize(op, sinks, s.q_heads, "sinks");
  }
  CheckIndex(op, q_segments, "q_segments");
  CheckIndex(op, kv_segments, "kv_segments");
  const int64_t q_size = s.batch * s.q_len * s.q_heads * s.head_dim;
  const int64_t kv_size = s.batch * s.kv_rows() * s.kv_heads * s.head_dim;
  CheckSize(op, q, q_size, "q");
  CheckSize(op, k, kv_size, "k");
  CheckSize(op, v, kv_size, "v");
  if (q_segments.empty() != kv_segments.empty()) {
    CheckSize(op, q_segments.empty() ? q_segments : kv_segments, 1, "segments (give both)");
  }
}

}  // namespace

void ReferenceOps::AttentionForward(const AttentionShape& s, const View& q, const View& k,
                                    const View& v, const View& sinks, const View& q_segments,
                                    const View& kv_segments, const View& out,
                                    const View& lse) const {
  const OpKind op = OpKind::kAttentionForward;
  CheckAttention(*this, op, s, q, k, v, sinks, q_segments, kv_segments);
  CheckData(*this, op, out, "out");
  CheckF32(op, lse, "lse");
  CheckSize(op, out, s.batch * s.q_len * s.q_heads * s.head_dim, "out");
  if (!lse.empty()) CheckSize(op, lse, s.batch * s.q_heads * s.q_len, "lse");
  F32Input qs(q), ks(k), vs(v);
  std::optional<F32Input> sink_values;
  if (!sinks.empty()) sink_values.emplace(sinks);
  F32Output os(out, false);
  RefAttentionForward(s, qs.get(), ks.get(), vs.get(), sink_values ? sink_values->get() : nullptr,
                      IndexOrNull(q_segments), IndexOrNull(kv_segments), os.get(),
                      lse.empty() ? nullptr : lse.f32());
  os.Store();
}

void ReferenceOps::AttentionBackward(const AttentionShape& s, const View& q, const View& k,
                                     const View& v, const View& sinks, const View& q_segments,
                                     const View& kv_segments, const View& out, const View& lse,
                                     const View& dout, const View& dq, const View& dk,
                                     const View& dv, const View& dsinks) const {
  const OpKind op = OpKind::kAttentionBackward;
  CheckAttention(*this, op, s, q, k, v, sinks, q_segments, kv_segments);
  CheckData(*this, op, out, "out");
  CheckData(*this, op, dout, "dout");
  CheckData(*this, op, dq, "dq");
  CheckData(*this, op, dk, "dk");
  CheckData(*this, op, dv, "dv");
  CheckF32(op, lse, "lse");
  CheckF32(op, dsinks, "dsinks");
  if (!dsinks.empty()) CheckSize(op, dsinks, s.q_heads, "dsinks");
  CheckSameSize(op, q, dq, "q, dq");
  CheckSameSize(op, k, dk, "k, dk");
  CheckSameSize(op, v, dv, "v, dv");
  F32Input qs(q), ks(k), vs(v), os(out), dos(dout);
  std::optional<F32Input> sink_values;
  if (!sinks.empty()) sink_values.emplace(sinks);
  F32Output dqs(dq, true), dks(dk, true), dvs(dv, true);
  RefAttentionBackward(s, qs.get(), ks.get(), vs.get(), sink_values ? sink_values->get() : nullptr,
                       IndexOrNull(q_segments), IndexOrNull(kv_segments), os.get(), lse.f32(),
                       dos.get(), dqs.get(), dks.get(), dvs.get(),
                       dsinks.empty() ? nullptr : dsinks.f32());
  dqs.Store();
  dks.Store();
  dvs.Store();
}

void ReferenceOps::SwigluForward(const View& gate, const View& up, const View& out) const {
  const OpKind op = OpKind::kSwigluForward;
  CheckData(*this, op, gate, "gate");
  CheckData(*this, op, up, "up");
  CheckData(*this, op, out, "out");
  CheckSameSize(op, gate, up, "gate, up");
  CheckSameSize(op, gate, out, "gate, out");
  F32Input g(gate), u(up);
  F32Output o(out, false);
  RefSwigluForward(g.get(), u.get(), gate.numel(), o.get());
  o.Store();
}

void ReferenceOps::SwigluBackward(const View& gate, const View& up, const View& dout,
                                  const View& dgate, const View& dup) const {
  const OpKind op = OpKind::kSwigluBackward;
  for (const auto& [v, name] :
       {std::pair{&gate, "gate"}, std::pair{&up, "up"}, std::pair{&dout, "dout"},
        std::pair{&dgate, "dgate"}, std::pair{&dup, "dup"}}) {
    CheckData(*this, op, *v, name);
    CheckSameSize(op, gate, *v, name);
  }
  F32Input g(gate), u(up), d(dout);
  F32Output dg(dgate, true), du(dup, true);
  RefSwigluBackward(g.get(), u.get(), d.get(), gate.numel(), dg.get(), du.get());
  dg.Store();
  du.Store();
}

void ReferenceOps::AddInPlace(const View& y, const View& x) const {
  CheckData(*this, OpKind::kAddInPlace, y, "y");
  CheckData(*this, OpKind::kAddInPlace, x, "x");
  CheckSameSize(OpKind::kAddInPlace, y, x, "y, x");
  F32Input xs(x);
  F32Output ys(y, true);
  RefAddInPlace(ys.get(), xs.get(), y.numel());
  ys.Store();
}

void ReferenceOps::Dropout(const View& x, float p, uint64_t seed, const View& out) const {
  CheckData(*this, OpKind::kDropout, x, "x");
  CheckData(*this, OpKind::kDropout, out, "out");
  CheckSameSize(OpKind::kDropout, x, out, "x, out");
  const float scale = 1.0f / (1.0f - p);
  F32Input xs(x);
  F32Output ys(out, false);
  for (int64_t i = 0; i < x.numel(); ++i) {
    ys.get()[i] = DropoutUniform(seed, static_cast<uint64_t>(i)) >= p ? xs.get()[i] * scale : 0.0f;
  }
  ys.Store();
}

void ReferenceOps::AddBias(const View& y, const View& bias) const {
  CheckData(*this, OpKind::kAddBias, y, "y");
  CheckData(*this, OpKind::kAddBias, bias, "bias");
  const int64_t cols = bias.numel(), rows = cols > 0 ? y.numel() / cols : 0;
  F32Input b(bias);
  F32Output ys(y, true);
  RefAddBias(ys.get(), b.get(), rows, cols);
  ys.Store();
}

void ReferenceOps::BiasBackward(const View& dy, const View& dbias) const {
  CheckData(*this, OpKind::kBiasBackward, dy, "dy");
  CheckF32(OpKind::kBiasBackward, dbias, "dbias");
  const int64_t cols = dbias.numel(), rows = cols > 0 ? dy.numel() / cols : 0;
  F32Input d(dy);
  RefBiasBackward(d.get(), rows, cols, dbias.f32());
}

void ReferenceOps::Convert(const View& src, const View& dst) const {
  CheckData(*this, OpKind::kConvert, src, "src");
  CheckData(*this, OpKind::kConvert, dst, "dst");
  CheckSameSize(OpKind::kConvert, src, dst, "src, dst");
  F32Input s(src);
  StoreF32(s.get(), dst, 0, dst.numel());
}

void ReferenceOps::CrossEntropyForward(const View& logits, const View& targets, const View& lse,
                                       const View& loss_sum) const {
  const OpKind op = OpKind::kCrossEntropyForward;
  CheckData(*this, op, logits, "logits");
  CheckIndex(op, targets, "targets");
  CheckF32(op, lse, "lse");
  CheckScalar(op, loss_sum, "loss_sum");
  const int64_t n = targets.numel(), vocab = n > 0 ? logits.numel() / n : 0;
  CheckSize(op, lse, n, "lse");
  F32Input l(logits);
  RefCrossEntropyForward(l.get(), targets.i32(), n, vocab, lse.f32(), loss_sum.f64());
}

void ReferenceOps::CrossEntropyBackward(const View& logits, const View& targets, const View& lse,
                                        float scale, const View& dlogits) const {
  const OpKind op = OpKind::kCrossEntropyBackward;
  CheckData(*this, op, logits, "logits");
  CheckData(*this, op, dlogits, "dlogits");
  CheckIndex(op, targets, "targets");
  CheckF32(op, lse, "lse");
  CheckSameSize(op, logits, dlogits, "logits, dlogits");
  const int64_t n = targets.numel(), vocab = n > 0 ? logits.numel() / n : 0;
  F32Input l(logits);
  F32Output d(dlogits, false);
  RefCrossEntropyBackward(l.get(), targets.i32(), lse.f32(), n, vocab, scale, d.get());
  d.Store();
}

void ReferenceOps::AdamWUpdate(const AdamWScalars& s, const View& p, const View& g, const View& m,
                               const View& v) const {
  const OpKind op = OpKind::kAdamWUpdate;
  for (const auto& [x, name] :
       {std::pair{&p, "p"}, std::pair{&g, "g"}, std::pair{&m, "m"}, std::pair{&v, "v"}}) {
    CheckF32(op, *x, name);
    CheckSameSize(op, p, *x, name);
  }
  RefAdamWUpdate(s, p.numel(), p.f32(), g.f32(), m.f32(), v.f32());
}

void ReferenceOps::SumOfSquares(const View& x, const View& sum) const {
  CheckF32(OpKind::kSumOfSquares, x, "x");
  CheckScalar(OpKind::kSumOfSquares, sum, "sum");
  *sum.f64() += SumOfSquaresLoop(x.f32(), x.numel());
}

void ReferenceOps::Scale(const View& x, float factor) const {
  CheckF32(OpKind::kScale, x, "x");
  float* p = x.f32();
  for (int64_t j = 0; j < x.numel(); ++j) p[j] *= factor;
}

}  // namespace air::engine
