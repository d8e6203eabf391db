// GPT-OSS decoder layer forward and backward (see gpt_oss_layer.h for the math).
#include "engine/model/gpt_oss_layer.h"

#include <cmath>

#include "engine/model/gpt_oss_config.h"

namespace air::engine {

void LayoutGptOssLayerActivations(Workspace& ws, const ModelConfig& c, DType dtype, int64_t batch,
                                  int64_t seq, bool with_input, GptOssLayerActivations& acts) {
  const int64_t n = batch * seq, dim = c.hidden_size;
  LayerActivations& a = acts.attn;
  a = LayerActivations{};
  auto act = [&](Shape shape) { return ws.Take(dtype, std::move(shape)); };
  if (with_input) a.x = ws.F32({n, dim});  // the residual stream stays fp32
  a.xn1 = act({n, dim});
  a.rstd1 = ws.F32({n});
  a.q = act({n, c.q_dim()});
  a.k = act({n, c.kv_dim()});
  a.v = act({n, c.kv_dim()});
  a.att = act({n, c.q_dim()});
  a.lse = ws.F32({batch, c.num_heads, seq});
  a.h = ws.F32({n, dim});
  a.xn2 = act({n, dim});
  a.rstd2 = ws.F32({n});
  const GptOssConfig& g = *c.gpt_oss;
  LayoutMoeActivations(ws, n, dim, c.intermediate_size, g.num_experts, g.experts_per_token, dtype,
                       acts.moe);
}

void LayoutGptOssGradScratch(Workspace& ws, const ModelConfig& c, int64_t n, GptOssGradScratch& g) {
  LayerGradScratch& a = g.attn;
  a = LayerGradScratch{};
  a.dxn = ws.F32({n, c.hidden_size});
  a.dq = ws.F32({n, c.q_dim()});
  a.dk = ws.F32({n, c.kv_dim()});
  a.dv = ws.F32({n, c.kv_dim()});
  a.datt = ws.F32({n, c.q_dim()});
  const GptOssConfig& cfg = *c.gpt_oss;
  LayoutMoeGradScratch(ws, n, c.hidden_size, c.intermediate_size, cfg.num_experts,
                       cfg.experts_per_token, g.moe);
}

AttentionShape GptOssAttentionShape(const LayerContext& ctx) {
  const ModelConfig& c = *ctx.config;
  AttentionShape s;
  s.batch = ctx.batch;
  s.q_len = ctx.seq;
  s.kv_len = ctx.seq;
  s.q_heads = c.num_heads;
  s.kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.sliding_window = c.sliding_window(ctx.layer);
  s.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));  // head_dim ** -0.5
  return s;
}

void GptOssLayerForward(const LayerContext& ctx, const GptOssLayerWeights& w,
                        const GptOssLayerActivations& acts, const View& out) {
  const ModelConfig& c = *ctx.config;
  const Backend& ops = *ctx.backend;
  const LayerActivations& a = acts.attn;
  const float eps = static_cast<float>(c.rms_norm_eps);
  // xn1 = RMSNorm(x) * w_in;  q, k, v with bias and RoPE
  ops.RmsNormForward(a.x, w.attn.input_norm->value, eps, a.xn1, a.rstd1);
  ProjectQkv(ctx, w.attn, a.xn1, a);
  // att (N, Hq*D) with the sinks; lse (B, Hq, T) includes them
  ops.AttentionForward(GptOssAttentionShape(ctx), a.q, a.k, a.v, w.sinks->value, ctx.segments,
                       ctx.segments, a.att, a.lse);
  // h = x + att Wo^T + bo
  LinearForward(ops, ctx.pass, a.att, w.attn.o, a.h);
  ops.AddInPlace(a.h, a.x);
  // out = h + MoE(RMSNorm(h) * w_post)
  ops.RmsNormForward(a.h, w.attn.post_norm->value, eps, a.xn2, a.rstd2);
  MoeForward(ops, ctx.pass, w.moe, a.xn2, acts.moe, out);
  ops.AddInPlace(out, a.h);
}

void GptOssLayerBackward(const LayerContext& ctx, const GptOssLayerWeights& w,
                         const GptOssLayerActivations& acts, const View& dres,
                         const GptOssGradScratch& g) {
  const Backend& ops = *ctx.backend;
  const LayerActivations& a = acts.attn;
  const LayerGradScratch& s = g.attn;
  const View& dh = dres;  // dL/dout on entry; the residual makes it the start of dL/dh

  // --- MoE: out = h + MoE(xn2) ---
  ops.Zero(s.dxn);
  MoeBackward(ops, ctx.pass, w.moe, a.xn2, acts.moe, dh, g.moe, s.dxn);
  ops.RmsNormBackward(a.h, w.attn.post_norm->value, a.rstd2, s.dxn, dh,
                      GradOrEmpty(w.attn.post_norm));

  // --- attention: h = x + o_proj(att) ---
  LinearBackward(ops, ctx.pass, a.att, w.attn.o, dh, s.datt, false);
  ops.Zero(s.dq);
  ops.Zero(s.dk);
  ops.Zero(s.dv);
  ops.AttentionBackward(GptOssAttentionShape(ctx), a.q, a.k, a.v, w.sinks->value, ctx.segments,
                        ctx.segments, a.att, a.lse, s.datt, s.dq, s.dk, s.dv, GradOrEmpty(w.sinks));
  ops.RopeBackward(s.dq, ctx.rope_cos, ctx.rope_sin);
  ops.RopeBackward(s.dk, ctx.rope_cos, ctx.rope_sin);
  // dxn1 = dq Wq + dk Wk + dv Wv (none when nothing reads it: LayerContext::input_grad)
  const bool dxn_needed = ctx.input_grad || !GradOrEmpty(w.attn.input_norm).empty();
  const View dxn = dxn_needed ? s.dxn : View();
  LinearBackward(ops, ctx.pass, a.xn1, w.attn.q, s.dq, dxn, false);
  LinearBackward(ops, ctx.pass, a.xn1, w.attn.k, s.dk, dxn, true);
  LinearBackward(ops, ctx.pass, a.xn1, w.attn.v, s.dv, dxn, true);
  // dx = dh (residual) + RMSNorm backward (x -> xn1), in place
  if (!dxn_needed) return;
  ops.RmsNormBackward(a.x, w.attn.input_norm->value, a.rstd1, s.dxn, dh,
                      GradOrEmpty(w.attn.input_norm));
}

}  // namespace air::engine
