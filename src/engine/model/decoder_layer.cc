// Decoder layer forward and backward (see decoder_layer.h for the math).
#include "engine/model/decoder_layer.h"

#include <cmath>
#include <cstring>

namespace air::engine {

void LinearForward(const Ops& ops, const float* x, int64_t rows, const Parameter& w,
                   const Parameter* bias, float* y) {
  const int64_t out = w.value.dim(0), in = w.value.dim(1);
  // y (N, out) = x (N, in) @ W (out, in)^T
  ops.Gemm(false, true, rows, out, in, x, in, w.value.data(), in, 0.0f, y, out);
  if (bias != nullptr) ops.AddBias(y, bias->value.data(), rows, out);
}

void LinearBackward(const Ops& ops, const float* x, int64_t rows, Parameter& w, Parameter* bias,
                    const float* dy, float* dx, bool accumulate_dx) {
  const int64_t out = w.value.dim(0), in = w.value.dim(1);
  // dW (out, in) += dy (N, out)^T @ x (N, in)
  ops.Gemm(true, false, out, in, rows, dy, out, x, in, 1.0f, w.grad.data(), in);
  if (bias != nullptr) ops.BiasBackward(dy, rows, out, bias->grad.data());
  // dx (N, in) (+)= dy (N, out) @ W (out, in)
  if (dx != nullptr) {
    ops.Gemm(false, false, rows, in, out, dy, out, w.value.data(), in, accumulate_dx ? 1.0f : 0.0f,
             dx, in);
  }
}

namespace {

AttentionShape MakeAttentionShape(const LayerContext& ctx) {
  const ModelConfig& c = *ctx.config;
  AttentionShape s;
  s.batch = ctx.batch;
  s.q_len = ctx.seq;
  s.kv_len = ctx.seq;
  s.q_heads = c.num_heads;
  s.kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.sliding_window = c.sliding_window(ctx.layer);
  s.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  return s;
}

}  // namespace

void ProjectQkv(const LayerContext& ctx, const LayerWeights& w, const float* xn,
                LayerActivations& acts) {
  const ModelConfig& c = *ctx.config;
  const Ops& ops = *ctx.ops;
  const int64_t n = ctx.rows();
  acts.q.ResizeZeroed({n, c.q_dim()});
  acts.k.ResizeZeroed({n, c.kv_dim()});
  acts.v.ResizeZeroed({n, c.kv_dim()});
  LinearForward(ops, xn, n, *w.q_proj, w.q_bias, acts.q.data());
  LinearForward(ops, xn, n, *w.k_proj, w.k_bias, acts.k.data());
  LinearForward(ops, xn, n, *w.v_proj, w.v_bias, acts.v.data());
  if (c.qk_norm) {
    // Qwen3: RMSNorm over each head's D values, before RoPE. Rows are (token, head) pairs.
    acts.q_raw = acts.q;
    acts.k_raw = acts.k;
    acts.rstd_q.ResizeZeroed({n * c.num_heads});
    acts.rstd_k.ResizeZeroed({n * c.num_kv_heads});
    ops.RmsNormForward(acts.q_raw.data(), w.q_norm->value.data(), n * c.num_heads, c.head_dim,
                       static_cast<float>(c.rms_norm_eps), acts.q.data(), acts.rstd_q.data());
    ops.RmsNormForward(acts.k_raw.data(), w.k_norm->value.data(), n * c.num_kv_heads, c.head_dim,
                       static_cast<float>(c.rms_norm_eps), acts.k.data(), acts.rstd_k.data());
  }
  ops.RopeForward(acts.q.data(), n, c.num_heads, c.head_dim, ctx.rope_cos, ctx.rope_sin);
  ops.RopeForward(acts.k.data(), n, c.num_kv_heads, c.head_dim, ctx.rope_cos, ctx.rope_sin);
}

void MlpForward(const LayerContext& ctx, const LayerWeights& w, LayerActivations& acts,
                Tensor& out) {
  const ModelConfig& c = *ctx.config;
  const Ops& ops = *ctx.ops;
  const int64_t n = ctx.rows(), dim = c.hidden_size, inter = c.intermediate_size;
  acts.xn2.ResizeZeroed({n, dim});
  acts.rstd2.ResizeZeroed({n});
  ops.RmsNormForward(acts.h.data(), w.post_norm->value.data(), n, dim,
                     static_cast<float>(c.rms_norm_eps), acts.xn2.data(), acts.rstd2.data());
  acts.gate.ResizeZeroed({n, inter});
  acts.up.ResizeZeroed({n, inter});
  acts.act.ResizeZeroed({n, inter});
  LinearForward(ops, acts.xn2.data(), n, *w.gate_proj, w.gate_bias, acts.gate.data());
  LinearForward(ops, acts.xn2.data(), n, *w.up_proj, w.up_bias, acts.up.data());
  ops.SwigluForward(acts.gate.data(), acts.up.data(), n * inter, acts.act.data());
  // out = h + act Wd^T (+ bd)
  out = acts.h;
  Tensor down({n, dim});
  LinearForward(ops, acts.act.data(), n, *w.down_proj, w.down_bias, down.data());
  ops.AddInPlace(out.data(), down.data(), n * dim);
}

void LayerForward(const LayerContext& ctx, const LayerWeights& w, LayerActivations& acts,
                  Tensor& out) {
  const ModelConfig& c = *ctx.config;
  const Ops& ops = *ctx.ops;
  const int64_t n = ctx.rows(), dim = c.hidden_size;

  // xn1 (N, C) = RMSNorm(x) * w_in
  acts.xn1.ResizeZeroed({n, dim});
  acts.rstd1.ResizeZeroed({n});
  ops.RmsNormForward(acts.x.data(), w.input_norm->value.data(), n, dim,
                     static_cast<float>(c.rms_norm_eps), acts.xn1.data(), acts.rstd1.data());
  ProjectQkv(ctx, w, acts.xn1.data(), acts);

  // att (N, Hq*D) = Attention(q, k, v); lse (B, Hq, T)
  const AttentionShape s = MakeAttentionShape(ctx);
  acts.att.ResizeZeroed({n, c.q_dim()});
  acts.lse.ResizeZeroed({ctx.batch, c.num_heads, ctx.seq});
  ops.AttentionForward(s, acts.q.data(), acts.k.data(), acts.v.data(), ctx.segments, ctx.segments,
                       acts.att.data(), acts.lse.data());

  // h (N, C) = x + att Wo^T (+ bo)
  acts.h.ResizeZeroed({n, dim});
  LinearForward(ops, acts.att.data(), n, *w.o_proj, w.o_bias, acts.h.data());
  ops.AddInPlace(acts.h.data(), acts.x.data(), n * dim);

  MlpForward(ctx, w, acts, out);
}

void LayerBackward(const LayerContext& ctx, const LayerWeights& w, const LayerActivations& acts,
                   const Tensor& dout, LayerGradScratch& g, Tensor& dx) {
  const ModelConfig& c = *ctx.config;
  const Ops& ops = *ctx.ops;
  const int64_t n = ctx.rows(), dim = c.hidden_size, inter = c.intermediate_size;

  // --- MLP: out = h + down(act) ---
  // dh starts as the residual path's dout.
  g.dh = dout;
  // dact (N, I) = dout Wd; dWd += dout^T act
  g.dact.ResizeZeroed({n, inter});
  LinearBackward(ops, acts.act.data(), n, *w.down_proj, w.down_bias, dout.data(), g.dact.data(),
                 false);
  // dgate, dup (N, I) from act = silu(gate) * up
  g.dgate.ResizeZeroed({n, inter});
  g.dup.ResizeZeroed({n, inter});
  ops.SwigluBackward(acts.gate.data(), acts.up.data(), g.dact.data(), n * inter, g.dgate.data(),
                     g.dup.data());
  // dxn2 (N, C) = dgate Wg + dup Wu
  g.dxn.ResizeZeroed({n, dim});
  LinearBackward(ops, acts.xn2.data(), n, *w.gate_proj, w.gate_bias, g.dgate.data(), g.dxn.data(),
                 false);
  LinearBackward(ops, acts.xn2.data(), n, *w.up_proj, w.up_bias, g.dup.data(), g.dxn.data(), true);
  // dh += RMSNorm backward (h -> xn2)
  ops.RmsNormBackward(acts.h.data(), w.post_norm->value.data(), acts.rstd2.data(), g.dxn.data(), n,
                      dim, g.dh.data(), w.post_norm->grad.data());

  // --- attention: h = x + o_proj(att) ---
  g.datt.ResizeZeroed({n, c.q_dim()});
  LinearBackward(ops, acts.att.data(), n, *w.o_proj, w.o_bias, g.dh.data(), g.datt.data(), false);
  g.dq.ResizeZeroed({n, c.q_dim()});
  g.dk.ResizeZeroed({n, c.kv_dim()});
  g.dv.ResizeZeroed({n, c.kv_dim()});
  const AttentionShape s = MakeAttentionShape(ctx);
  ops.AttentionBackward(s, acts.q.data(), acts.k.data(), acts.v.data(), ctx.segments, ctx.segments,
                        acts.att.data(), acts.lse.data(), g.datt.data(), g.dq.data(), g.dk.data(),
                        g.dv.data());
  // Undo RoPE on the gradients (in place).
  ops.RopeBackward(g.dq.data(), n, c.num_heads, c.head_dim, ctx.rope_cos, ctx.rope_sin);
  ops.RopeBackward(g.dk.data(), n, c.num_kv_heads, c.head_dim, ctx.rope_cos, ctx.rope_sin);
  const float* dq = g.dq.data();
  const float* dk = g.dk.data();
  if (c.qk_norm) {
    g.dq_raw.ResizeZeroed({n, c.q_dim()});
    g.dk_raw.ResizeZeroed({n, c.kv_dim()});
    ops.RmsNormBackward(acts.q_raw.data(), w.q_norm->value.data(), acts.rstd_q.data(), dq,
                        n * c.num_heads, c.head_dim, g.dq_raw.data(), w.q_norm->grad.data());
    ops.RmsNormBackward(acts.k_raw.data(), w.k_norm->value.data(), acts.rstd_k.data(), dk,
                        n * c.num_kv_heads, c.head_dim, g.dk_raw.data(), w.k_norm->grad.data());
    dq = g.dq_raw.data();
    dk = g.dk_raw.data();
  }
  // dxn1 (N, C) = dq Wq + dk Wk + dv Wv
  LinearBackward(ops, acts.xn1.data(), n, *w.q_proj, w.q_bias, dq, g.dxn.data(), false);
  LinearBackward(ops, acts.xn1.data(), n, *w.k_proj, w.k_bias, dk, g.dxn.data(), true);
  LinearBackward(ops, acts.xn1.data(), n, *w.v_proj, w.v_bias, g.dv.data(), g.dxn.data(), true);
  // dx = dh (residual) + RMSNorm backward (x -> xn1)
  if (&dx != &g.dh) dx = g.dh;
  ops.RmsNormBackward(acts.x.data(), w.input_norm->value.data(), acts.rstd1.data(), g.dxn.data(), n,
                      dim, dx.data(), w.input_norm->grad.data());
}

}  // namespace air::engine
