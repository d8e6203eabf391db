// Decoder layer forward and backward (see decoder_layer.h for the math).
#include "engine/model/decoder_layer.h"

#include <cmath>

namespace air::engine {

void LayoutLayerActivations(Workspace& ws, const ModelConfig& c, DType dtype, int64_t batch,
                            int64_t seq, bool with_input, LayerActivations& a) {
  const int64_t n = batch * seq, dim = c.hidden_size, inter = c.intermediate_size;
  auto act = [&](Shape shape) { return ws.Take(dtype, std::move(shape)); };
  // The residual stream (x, h) stays fp32 whatever the compute dtype: it sums every layer's
  // output, and rounding it to bf16 at each add is where bf16 training loses the most.
  if (with_input) a.x = ws.F32({n, dim});
  a.xn1 = act({n, dim});
  a.rstd1 = ws.F32({n});
  if (c.qk_norm) {
    a.q_raw = act({n, c.q_dim()});
    a.k_raw = act({n, c.kv_dim()});
    a.rstd_q = ws.F32({n * c.num_heads});
    a.rstd_k = ws.F32({n * c.num_kv_heads});
  }
  a.q = act({n, c.q_dim()});
  a.k = act({n, c.kv_dim()});
  a.v = act({n, c.kv_dim()});
  a.att = act({n, c.q_dim()});
  a.lse = ws.F32({batch, c.num_heads, seq});
  a.h = ws.F32({n, dim});
  a.xn2 = act({n, dim});
  a.rstd2 = ws.F32({n});
  a.gate = act({n, inter});
  a.up = act({n, inter});
  a.act = act({n, inter});
}

void LayoutLayerGradScratch(Workspace& ws, const ModelConfig& c, DType dtype, int64_t n,
                            LayerGradScratch& g) {
  const int64_t dim = c.hidden_size, inter = c.intermediate_size;
  g.dxn = ws.F32({n, dim});
  g.dq = ws.F32({n, c.q_dim()});
  g.dk = ws.F32({n, c.kv_dim()});
  g.dv = ws.F32({n, c.kv_dim()});
  g.datt = ws.Take(dtype, {n, c.q_dim()});
  g.dgate = ws.Take(dtype, {n, inter});
  g.dup = ws.Take(dtype, {n, inter});
  g.dact = ws.F32({n, inter});
  if (c.qk_norm) {
    g.dq_raw = ws.F32({n, c.q_dim()});
    g.dk_raw = ws.F32({n, c.kv_dim()});
  }
}

AttentionShape LayerAttentionShape(const LayerContext& ctx) {
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

namespace {

// (N, H*D) viewed as N*H rows of D, for the per-head q/k norms.
View PerHead(const View& v, int64_t heads_times_rows, int64_t head_dim) {
  return v.Reshaped({heads_times_rows, head_dim});
}

}  // namespace

void ProjectQkv(const LayerContext& ctx, const LayerWeights& w, const View& xn,
                const LayerActivations& acts) {
  const ModelConfig& c = *ctx.config;
  const Backend& ops = *ctx.backend;
  const int64_t n = ctx.rows();
  // Qwen3 projects into q_raw/k_raw and RMS-normalizes each head's D values into q/k (rows are
  // (token, head) pairs), before RoPE.
  const View& q = c.qk_norm ? acts.q_raw : acts.q;
  const View& k = c.qk_norm ? acts.k_raw : acts.k;
  LinearForward(ops, ctx.pass, xn, w.q, q);
  LinearForward(ops, ctx.pass, xn, w.k, k);
  LinearForward(ops, ctx.pass, xn, w.v, acts.v);
  if (c.qk_norm) {
    const float eps = static_cast<float>(c.rms_norm_eps);
    ops.RmsNormForward(PerHead(q, n * c.num_heads, c.head_dim), w.q_norm->value, eps,
                       PerHead(acts.q, n * c.num_heads, c.head_dim), acts.rstd_q);
    ops.RmsNormForward(PerHead(k, n * c.num_kv_heads, c.head_dim), w.k_norm->value, eps,
                       PerHead(acts.k, n * c.num_kv_heads, c.head_dim), acts.rstd_k);
  }
  ops.RopeForward(acts.q, ctx.rope_cos, ctx.rope_sin);
  ops.RopeForward(acts.k, ctx.rope_cos, ctx.rope_sin);
}

void MlpForward(const LayerContext& ctx, const LayerWeights& w, const LayerActivations& acts,
                const View& out) {
  const ModelConfig& c = *ctx.config;
  const Backend& ops = *ctx.backend;
  ops.RmsNormForward(acts.h, w.post_norm->value, static_cast<float>(c.rms_norm_eps), acts.xn2,
                     acts.rstd2);
  LinearForward(ops, ctx.pass, acts.xn2, w.gate, acts.gate);
  LinearForward(ops, ctx.pass, acts.xn2, w.up, acts.up);
  ops.SwigluForward(acts.gate, acts.up, acts.act);
  // out = act Wd^T (+ bd) + h   (the same sums as h + down: fp addition commutes)
  LinearForward(ops, ctx.pass, acts.act, w.down, out);
  ops.AddInPlace(out, acts.h);
}

void LayerForward(const LayerContext& ctx, const LayerWeights& w, const LayerActivations& acts,
                  const View& out) {
  const ModelConfig& c = *ctx.config;
  const Backend& ops = *ctx.backend;
  // xn1 (N, C) = RMSNorm(x) * w_in
  ops.RmsNormForward(acts.x, w.input_norm->value, static_cast<float>(c.rms_norm_eps), acts.xn1,
                     acts.rstd1);
  ProjectQkv(ctx, w, acts.xn1, acts);
  // att (N, Hq*D) = Attention(q, k, v); lse (B, Hq, T)
  ops.AttentionForward(LayerAttentionShape(ctx), acts.q, acts.k, acts.v, View(), ctx.segments,
                       ctx.segments, acts.att, acts.lse);
  // h (N, C) = x + att Wo^T (+ bo)
  LinearForward(ops, ctx.pass, acts.att, w.o, acts.h);
  ops.AddInPlace(acts.h, acts.x);
  MlpForward(ctx, w, acts, out);
}

void LayerBackward(const LayerContext& ctx, const LayerWeights& w, const LayerActivations& acts,
                   const View& dres, const LayerGradScratch& g) {
  const ModelConfig& c = *ctx.config;
  const Backend& ops = *ctx.backend;
  const int64_t n = ctx.rows();
  const View& dh = dres;  // dL/dout on entry; the residual makes it the start of dL/dh

  // --- MLP: out = h + down(act) ---
  // dact (N, I) = dout Wd; dWd += dout^T act  (reads dout before dh accumulates into it)
  LinearBackward(ops, ctx.pass, acts.act, w.down, dh, g.dact, false);
  // dgate, dup (N, I) from act = silu(gate) * up (the op accumulates: start from zero)
  ops.Zero(g.dgate);
  ops.Zero(g.dup);
  ops.SwigluBackward(acts.gate, acts.up, g.dact, g.dgate, g.dup);
  // dxn2 (N, C) = dgate Wg + dup Wu
  LinearBackward(ops, ctx.pass, acts.xn2, w.gate, g.dgate, g.dxn, false);
  LinearBackward(ops, ctx.pass, acts.xn2, w.up, g.dup, g.dxn, true);
  // dh += RMSNorm backward (h -> xn2)
  ops.RmsNormBackward(acts.h, w.post_norm->value, acts.rstd2, g.dxn, dh, GradOrEmpty(w.post_norm));

  // --- attention: h = x + o_proj(att) ---
  LinearBackward(ops, ctx.pass, acts.att, w.o, dh, g.datt, false);
  ops.Zero(g.dq);
  ops.Zero(g.dk);
  ops.Zero(g.dv);
  ops.AttentionBackward(LayerAttentionShape(ctx), acts.q, acts.k, acts.v, View(), ctx.segments,
                        ctx.segments, acts.att, acts.lse, g.datt, g.dq, g.dk, g.dv, View());
  // Undo RoPE on the gradients (in place).
  ops.RopeBackward(g.dq, ctx.rope_cos, ctx.rope_sin);
  ops.RopeBackward(g.dk, ctx.rope_cos, ctx.rope_sin);
  View dq = g.dq, dk = g.dk;
  if (c.qk_norm) {
    ops.Zero(g.dq_raw);
    ops.Zero(g.dk_raw);
    const int64_t qh = n * c.num_heads, kh = n * c.num_kv_heads, d = c.head_dim;
    ops.RmsNormBackward(PerHead(acts.q_raw, qh, d), w.q_norm->value, acts.rstd_q,
                        PerHead(dq, qh, d), PerHead(g.dq_raw, qh, d), GradOrEmpty(w.q_norm));
    ops.RmsNormBackward(PerHead(acts.k_raw, kh, d), w.k_norm->value, acts.rstd_k,
                        PerHead(dk, kh, d), PerHead(g.dk_raw, kh, d), GradOrEmpty(w.k_norm));
    dq = g.dq_raw;
    dk = g.dk_raw;
  }
  // dxn1 (N, C) = dq Wq + dk Wk + dv Wv: none when neither dx nor the input norm's gradient
  // needs it (ctx.input_grad); the projections' own gradients (LoRA's) are computed either way.
  const bool dxn_needed = ctx.input_grad || !GradOrEmpty(w.input_norm).empty();
  const View dxn = dxn_needed ? g.dxn : View();
  LinearBackward(ops, ctx.pass, acts.xn1, w.q, dq, dxn, false);
  LinearBackward(ops, ctx.pass, acts.xn1, w.k, dk, dxn, true);
  LinearBackward(ops, ctx.pass, acts.xn1, w.v, g.dv, dxn, true);
  // dx = dh (residual) + RMSNorm backward (x -> xn1), in place
  if (!dxn_needed) return;
  ops.RmsNormBackward(acts.x, w.input_norm->value, acts.rstd1, g.dxn, dh,
                      GradOrEmpty(w.input_norm));
}

}  // namespace air::engine
