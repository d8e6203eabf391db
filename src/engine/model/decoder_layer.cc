// Decoder layer forward and backward (see decoder_layer.h for the math).
#include "engine/model/decoder_layer.h"

#include <cmath>

namespace air::engine {

namespace {

float* GradOrNull(const Parameter* p) {
  return p != nullptr && p->trainable ? p->grad.f32() : nullptr;
}

}  // namespace

void LinearForward(const Backend& ops, const float* x, int64_t rows, const Parameter& w,
                   const Parameter* bias, float* y) {
  const int64_t out = w.shape[0], in = w.shape[1];
  // y (N, out) = x (N, in) @ W (out, in)^T
  ops.Gemm(false, true, rows, out, in, x, in, w.value.f32(), in, 0.0f, y, out);
  if (bias != nullptr) ops.AddBias(y, bias->value.f32(), rows, out);
}

void LinearBackward(const Backend& ops, const float* x, int64_t rows, const Parameter& w,
                    const Parameter* bias, const float* dy, float* dx, bool accumulate_dx) {
  const int64_t out = w.shape[0], in = w.shape[1];
  // dW (out, in) += dy (N, out)^T @ x (N, in); none for a frozen W
  if (w.trainable) ops.Gemm(true, false, out, in, rows, dy, out, x, in, 1.0f, w.grad.f32(), in);
  if (float* db = GradOrNull(bias)) ops.BiasBackward(dy, rows, out, db);
  // dx (N, in) (+)= dy (N, out) @ W (out, in)
  if (dx != nullptr) {
    ops.Gemm(false, false, rows, in, out, dy, out, w.value.f32(), in, accumulate_dx ? 1.0f : 0.0f,
             dx, in);
  }
}

void LayoutLayerActivations(Workspace& ws, const ModelConfig& c, int64_t batch, int64_t seq,
                            bool with_input, LayerActivations& a) {
  const int64_t n = batch * seq, dim = c.hidden_size, inter = c.intermediate_size;
  if (with_input) a.x = ws.F32({n, dim});
  a.xn1 = ws.F32({n, dim});
  a.rstd1 = ws.F32({n});
  if (c.qk_norm) {
    a.q_raw = ws.F32({n, c.q_dim()});
    a.k_raw = ws.F32({n, c.kv_dim()});
    a.rstd_q = ws.F32({n * c.num_heads});
    a.rstd_k = ws.F32({n * c.num_kv_heads});
  }
  a.q = ws.F32({n, c.q_dim()});
  a.k = ws.F32({n, c.kv_dim()});
  a.v = ws.F32({n, c.kv_dim()});
  a.att = ws.F32({n, c.q_dim()});
  a.lse = ws.F32({batch, c.num_heads, seq});
  a.h = ws.F32({n, dim});
  a.xn2 = ws.F32({n, dim});
  a.rstd2 = ws.F32({n});
  a.gate = ws.F32({n, inter});
  a.up = ws.F32({n, inter});
  a.act = ws.F32({n, inter});
}

void LayoutLayerGradScratch(Workspace& ws, const ModelConfig& c, int64_t n, LayerGradScratch& g) {
  const int64_t dim = c.hidden_size, inter = c.intermediate_size;
  g.dxn = ws.F32({n, dim});
  g.dq = ws.F32({n, c.q_dim()});
  g.dk = ws.F32({n, c.kv_dim()});
  g.dv = ws.F32({n, c.kv_dim()});
  g.datt = ws.F32({n, c.q_dim()});
  g.dgate = ws.F32({n, inter});
  g.dup = ws.F32({n, inter});
  g.dact = ws.F32({n, inter});
  if (c.qk_norm) {
    g.dq_raw = ws.F32({n, c.q_dim()});
    g.dk_raw = ws.F32({n, c.kv_dim()});
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
                const LayerActivations& acts) {
  const ModelConfig& c = *ctx.config;
  const Backend& ops = *ctx.backend;
  const int64_t n = ctx.rows();
  // Qwen3 projects into q_raw/k_raw and RMS-normalizes each head's D values into q/k (rows are
  // (token, head) pairs), before RoPE.
  float* q = c.qk_norm ? acts.q_raw.f32() : acts.q.f32();
  float* k = c.qk_norm ? acts.k_raw.f32() : acts.k.f32();
  LinearForward(ops, xn, n, *w.q_proj, w.q_bias, q);
  LinearForward(ops, xn, n, *w.k_proj, w.k_bias, k);
  LinearForward(ops, xn, n, *w.v_proj, w.v_bias, acts.v.f32());
  if (c.qk_norm) {
    ops.RmsNormForward(q, w.q_norm->value.f32(), n * c.num_heads, c.head_dim,
                       static_cast<float>(c.rms_norm_eps), acts.q.f32(), acts.rstd_q.f32());
    ops.RmsNormForward(k, w.k_norm->value.f32(), n * c.num_kv_heads, c.head_dim,
                       static_cast<float>(c.rms_norm_eps), acts.k.f32(), acts.rstd_k.f32());
  }
  ops.RopeForward(acts.q.f32(), n, c.num_heads, c.head_dim, ctx.rope_cos, ctx.rope_sin);
  ops.RopeForward(acts.k.f32(), n, c.num_kv_heads, c.head_dim, ctx.rope_cos, ctx.rope_sin);
}

void MlpForward(const LayerContext& ctx, const LayerWeights& w, const LayerActivations& acts,
                const View& out) {
  const ModelConfig& c = *ctx.config;
  const Backend& ops = *ctx.backend;
  const int64_t n = ctx.rows(), dim = c.hidden_size, inter = c.intermediate_size;
  ops.RmsNormForward(acts.h.f32(), w.post_norm->value.f32(), n, dim,
                     static_cast<float>(c.rms_norm_eps), acts.xn2.f32(), acts.rstd2.f32());
  LinearForward(ops, acts.xn2.f32(), n, *w.gate_proj, w.gate_bias, acts.gate.f32());
  LinearForward(ops, acts.xn2.f32(), n, *w.up_proj, w.up_bias, acts.up.f32());
  ops.SwigluForward(acts.gate.f32(), acts.up.f32(), n * inter, acts.act.f32());
  // out = act Wd^T (+ bd) + h   (the same sums as h + down: fp addition commutes)
  LinearForward(ops, acts.act.f32(), n, *w.down_proj, w.down_bias, out.f32());
  ops.AddInPlace(out.f32(), acts.h.f32(), n * dim);
}

void LayerForward(const LayerContext& ctx, const LayerWeights& w, const LayerActivations& acts,
                  const View& out) {
  const ModelConfig& c = *ctx.config;
  const Backend& ops = *ctx.backend;
  const int64_t n = ctx.rows(), dim = c.hidden_size;

  // xn1 (N, C) = RMSNorm(x) * w_in
  ops.RmsNormForward(acts.x.f32(), w.input_norm->value.f32(), n, dim,
                     static_cast<float>(c.rms_norm_eps), acts.xn1.f32(), acts.rstd1.f32());
  ProjectQkv(ctx, w, acts.xn1.f32(), acts);

  // att (N, Hq*D) = Attention(q, k, v); lse (B, Hq, T)
  const AttentionShape s = MakeAttentionShape(ctx);
  ops.AttentionForward(s, acts.q.f32(), acts.k.f32(), acts.v.f32(), ctx.segments, ctx.segments,
                       acts.att.f32(), acts.lse.f32());

  // h (N, C) = x + att Wo^T (+ bo)
  LinearForward(ops, acts.att.f32(), n, *w.o_proj, w.o_bias, acts.h.f32());
  ops.AddInPlace(acts.h.f32(), acts.x.f32(), n * dim);

  MlpForward(ctx, w, acts, out);
}

void LayerBackward(const LayerContext& ctx, const LayerWeights& w, const LayerActivations& acts,
                   const View& dres, const LayerGradScratch& g) {
  const ModelConfig& c = *ctx.config;
  const Backend& ops = *ctx.backend;
  const int64_t n = ctx.rows(), dim = c.hidden_size, inter = c.intermediate_size;
  float* dh = dres.f32();  // dL/dout on entry; the residual makes it the start of dL/dh

  // --- MLP: out = h + down(act) ---
  // dact (N, I) = dout Wd; dWd += dout^T act  (reads dout before dh accumulates into it)
  LinearBackward(ops, acts.act.f32(), n, *w.down_proj, w.down_bias, dh, g.dact.f32(), false);
  // dgate, dup (N, I) from act = silu(gate) * up (the op accumulates: start from zero)
  ops.Zero(g.dgate);
  ops.Zero(g.dup);
  ops.SwigluBackward(acts.gate.f32(), acts.up.f32(), g.dact.f32(), n * inter, g.dgate.f32(),
                     g.dup.f32());
  // dxn2 (N, C) = dgate Wg + dup Wu
  LinearBackward(ops, acts.xn2.f32(), n, *w.gate_proj, w.gate_bias, g.dgate.f32(), g.dxn.f32(),
                 false);
  LinearBackward(ops, acts.xn2.f32(), n, *w.up_proj, w.up_bias, g.dup.f32(), g.dxn.f32(), true);
  // dh += RMSNorm backward (h -> xn2)
  ops.RmsNormBackward(acts.h.f32(), w.post_norm->value.f32(), acts.rstd2.f32(), g.dxn.f32(), n, dim,
                      dh, GradOrNull(w.post_norm));

  // --- attention: h = x + o_proj(att) ---
  LinearBackward(ops, acts.att.f32(), n, *w.o_proj, w.o_bias, dh, g.datt.f32(), false);
  ops.Zero(g.dq);
  ops.Zero(g.dk);
  ops.Zero(g.dv);
  const AttentionShape s = MakeAttentionShape(ctx);
  ops.AttentionBackward(s, acts.q.f32(), acts.k.f32(), acts.v.f32(), ctx.segments, ctx.segments,
                        acts.att.f32(), acts.lse.f32(), g.datt.f32(), g.dq.f32(), g.dk.f32(),
                        g.dv.f32());
  // Undo RoPE on the gradients (in place).
  ops.RopeBackward(g.dq.f32(), n, c.num_heads, c.head_dim, ctx.rope_cos, ctx.rope_sin);
  ops.RopeBackward(g.dk.f32(), n, c.num_kv_heads, c.head_dim, ctx.rope_cos, ctx.rope_sin);
  const float* dq = g.dq.f32();
  const float* dk = g.dk.f32();
  if (c.qk_norm) {
    ops.Zero(g.dq_raw);
    ops.Zero(g.dk_raw);
    ops.RmsNormBackward(acts.q_raw.f32(), w.q_norm->value.f32(), acts.rstd_q.f32(), dq,
                        n * c.num_heads, c.head_dim, g.dq_raw.f32(), GradOrNull(w.q_norm));
    ops.RmsNormBackward(acts.k_raw.f32(), w.k_norm->value.f32(), acts.rstd_k.f32(), dk,
                        n * c.num_kv_heads, c.head_dim, g.dk_raw.f32(), GradOrNull(w.k_norm));
    dq = g.dq_raw.f32();
    dk = g.dk_raw.f32();
  }
  // dxn1 (N, C) = dq Wq + dk Wk + dv Wv
  LinearBackward(ops, acts.xn1.f32(), n, *w.q_proj, w.q_bias, dq, g.dxn.f32(), false);
  LinearBackward(ops, acts.xn1.f32(), n, *w.k_proj, w.k_bias, dk, g.dxn.f32(), true);
  LinearBackward(ops, acts.xn1.f32(), n, *w.v_proj, w.v_bias, g.dv.f32(), g.dxn.f32(), true);
  // dx = dh (residual) + RMSNorm backward (x -> xn1), in place
  ops.RmsNormBackward(acts.x.f32(), w.input_norm->value.f32(), acts.rstd1.f32(), g.dxn.f32(), n,
                      dim, dh, GradOrNull(w.input_norm));
}

}  // namespace air::engine
