// The per-op harness (ggml's test-backend-ops): EVERY op of ops.h, on every registered backend
// (backend/registry.h: the CPU reference itself, the fast CPU kernels at the level this process
// selects — ctest runs this binary again under AIR_CPU_KERNELS=avx2 and =generic), in every data
// dtype the backend supports, against the fp32 reference (ReferenceOps on F32 views of the same
// inputs, rounded to the tested dtype first). Three precisions:
//   f32            every data argument F32
//   bf16           every data argument BF16 (outputs rounded once)
//   bf16+f32grad   the mixed-precision model's pattern: activations and weights BF16, the
//                  gradients an op accumulates into (and GEMM's dy operand) F32
// Inputs and outputs live in the backend's own memory (allocated, uploaded and read back through
// it, as a GPU backend needs); the shapes include ragged sizes that hit the edge paths of the
// blocked kernels. Each backend is held to its declared tolerances for the dtype, and the
// measured worst error of each op family is printed. An op a backend does not support in a dtype
// is printed as such, never silently passed over.
#include "ops_harness.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "engine/backend/registry.h"
#include "engine/data/batch.h"
#include "engine/ops/cpu/reference_ops.h"
#include "engine/ops/cpu/thread_pool.h"

namespace air::engine {
namespace {

using testing::DeviceArrays;
using testing::OpsHarness;
using testing::Precision;
using testing::RandomVector;
using testing::RoundedTo;
using testing::ScaledMaxDiff;

// ---- GEMM --------------------------------------------------------------------------------

TEST_P(OpsHarness, GemmAllTransposesAndRaggedShapes) {
  if (!Runs(OpKind::kGemm)) return;
  const Precision& p = precision();
  // f32 and bf16: every operand in the precision; bf16_f32grad: the backward's pattern, an F32
  // gradient times a BF16 operand into F32 (dx = dy W, dW = dy^T x).
  const DType a_dtype = p.grad, b_dtype = p.in, c_dtype = p.name == "bf16" ? p.out : p.grad;
  const bool bf16_product = a_dtype == DType::kBF16 || b_dtype == DType::kBF16;
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes =
      {
          {1, 1, 1},      {3, 5, 7},      {8, 32, 16},    {9, 33, 17},
          {130, 70, 300}, {257, 300, 40}, {64, 1000, 64}, {1, 513, 129},
          {200, 1, 77},   {33, 4200, 300}};  // the last: two column blocks of B and two K slices
  for (auto [m, n, k] : shapes) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (float beta : {0.0f, 1.0f}) {
          const int64_t lda = ta ? m : k, ldb = tb ? k : n;
          // Both operands rounded when the product is bf16 (ops.h's rule).
          const DType round = bf16_product ? DType::kBF16 : DType::kF32;
          auto a = RoundedTo(RandomVector(static_cast<size_t>(m * k), 1), round);
          auto b = RoundedTo(RandomVector(static_cast<size_t>(k * n), 2), round);
          auto c_ref = RoundedTo(RandomVector(static_cast<size_t>(m * n), 3), c_dtype);
          DeviceArrays d(*backend_);
          const View c = d.Data(c_ref, c_dtype);
          backend_->Gemm(ta, tb, m, n, k, d.Data(a, a_dtype), lda, d.Data(b, b_dtype), ldb, beta, c,
                         n);
          const View c_want = d.F32(c_ref);
          ref_.Gemm(ta, tb, m, n, k, d.F32(a), lda, d.F32(b), ldb, beta, c_want, n);
          Expect("gemm/sqrt(k)", ScaledMaxDiff(d.Get(c), d.Get(c_want)) / std::sqrt(double(k)),
                 tol().gemm_per_sqrt_k,
                 "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                     " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
        }
      }
    }
  }
}

TEST_P(OpsHarness, GemmBetaZeroIgnoresNaNInOutputAndStridedOperands) {
  if (!Runs(OpKind::kGemm)) return;
  const Precision& p = precision();
  const int64_t m = 20, n = 40, k = 24, pad = 7;
  auto a = In(static_cast<size_t>(m * (k + pad)), 4);
  auto b = In(static_cast<size_t>(n * (k + pad)), 5);
  std::vector<float> c_init(static_cast<size_t>(m * (n + pad)), NAN);
  DeviceArrays d(*backend_);
  const View c = d.Data(c_init, p.out), want = d.F32(c_init);
  ref_.Gemm(false, true, m, n, k, d.F32(a), k + pad, d.F32(b), k + pad, 0.0f, want, n + pad);
  backend_->Gemm(false, true, m, n, k, d.Data(a, p.in), k + pad, d.Data(b, p.in), k + pad, 0.0f, c,
                 n + pad);
  const auto got = d.Get(c), ref = d.Get(want);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n + pad; ++j) {
      const float f = got[i * (n + pad) + j];
      if (j < n) {
        ASSERT_FALSE(std::isnan(f));
        EXPECT_NEAR(f, ref[i * (n + pad) + j], 0.05f + 1e-4f);
      } else {
        EXPECT_TRUE(std::isnan(f)) << "wrote outside the matrix at column " << j;
      }
    }
  }
}

TEST_P(OpsHarness, GemmWithZeroDepthScalesC) {
  if (!Runs(OpKind::kGemm)) return;
  DeviceArrays d(*backend_);
  const View c = d.Data({1, 2, 3, 4}, precision().out);
  backend_->Gemm(false, false, 2, 2, 0, View(), 0, View(), 2, 1.0f, c, 2);
  EXPECT_EQ(d.Get(c), (std::vector<float>{1, 2, 3, 4}));
  backend_->Gemm(false, false, 2, 2, 0, View(), 0, View(), 2, 0.0f, c, 2);
  EXPECT_EQ(d.Get(c), (std::vector<float>{0, 0, 0, 0}));
}

// ---- embedding, RoPE, elementwise ---------------------------------------------------------

TEST_P(OpsHarness, EmbeddingForwardBackward) {
  if (!Runs(OpKind::kEmbeddingForward) || !Runs(OpKind::kEmbeddingBackward)) return;
  const Precision& p = precision();
  const int64_t vocab = 37, dim = 70, n = 300;
  auto table = In(static_cast<size_t>(vocab * dim), 30);
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7 + i / 5) % vocab);
  DeviceArrays d(*backend_);
  const View idv = d.I32(ids);
  const View out = d.Data(std::vector<float>(n * dim), p.out, {n, dim});
  const View want = d.F32(std::vector<float>(n * dim), {n, dim});
  backend_->EmbeddingForward(idv, d.Data(table, p.in, {vocab, dim}), out);
  ref_.EmbeddingForward(idv, d.F32(table, {vocab, dim}), want);
  Expect("elementwise", ScaledMaxDiff(d.Get(out), d.Get(want)), tol().elementwise, "forward");
  auto dout = Grad(static_cast<size_t>(n * dim), 31);
  auto init = RandomVector(static_cast<size_t>(vocab * dim), 32);
  for (int32_t skip : {-1, 5}) {
    const View dt = d.F32(init, {vocab, dim}), dt_want = d.F32(init, {vocab, dim});
    backend_->EmbeddingBackward(idv, d.Data(dout, p.grad, {n, dim}), skip, dt);
    ref_.EmbeddingBackward(idv, d.F32(dout, {n, dim}), skip, dt_want);
    Expect("elementwise", ScaledMaxDiff(d.Get(dt), d.Get(dt_want)), tol().elementwise,
           "backward skip " + std::to_string(skip));
  }
}

TEST_P(OpsHarness, RopeTablesForwardBackward) {
  if (!Runs(OpKind::kRopeTables) || !Runs(OpKind::kRopeForward) || !Runs(OpKind::kRopeBackward)) {
    return;
  }
  const Precision& p = precision();
  const int64_t n = 57, heads = 3, head_dim = 16, half = head_dim / 2;
  std::vector<int32_t> positions(n);
  for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>((i * 13) % 40);
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / head_dim);
  DeviceArrays d(*backend_);
  const View pos = d.I32(positions), inv = d.F32(inv_freq);
  const View cos = d.F32(std::vector<float>(n * half), {n, half});
  const View sin = d.F32(std::vector<float>(n * half), {n, half});
  const View cos_want = d.F32(std::vector<float>(n * half), {n, half});
  const View sin_want = d.F32(std::vector<float>(n * half), {n, half});
  // YaRN's attention factor scales the tables (1 leaves them alone).
  for (float scale : {1.3465736f, 1.0f}) {
    backend_->RopeTables(pos, inv, scale, cos, sin);
    ref_.RopeTables(pos, inv, scale, cos_want, sin_want);
    Expect("elementwise", ScaledMaxDiff(d.Get(cos), d.Get(cos_want)), tol().elementwise, "cos");
    Expect("elementwise", ScaledMaxDiff(d.Get(sin), d.Get(sin_want)), tol().elementwise, "sin");
  }
  auto x = In(static_cast<size_t>(n * heads * head_dim), 33);
  const View xv = d.Data(x, p.in, {n, heads * head_dim}), x_want = d.F32(x, {n, heads * head_dim});
  backend_->RopeForward(xv, cos_want, sin_want);
  ref_.RopeForward(x_want, cos_want, sin_want);
  Expect("elementwise", ScaledMaxDiff(d.Get(xv), d.Get(x_want)), tol().elementwise, "forward");
  auto dx = Grad(static_cast<size_t>(n * heads * head_dim), 34);
  const View dxv = d.Data(dx, p.grad), dx_want = d.F32(dx);
  backend_->RopeBackward(dxv, cos_want, sin_want);
  ref_.RopeBackward(dx_want, cos_want, sin_want);
  Expect("elementwise", ScaledMaxDiff(d.Get(dxv), d.Get(dx_want)), tol().elementwise, "backward");
}

TEST_P(OpsHarness, AddInPlaceAddBiasBiasBackwardConvert) {
  for (OpKind op :
       {OpKind::kAddInPlace, OpKind::kAddBias, OpKind::kBiasBackward, OpKind::kConvert}) {
    if (!Runs(op)) return;
  }
  const Precision& p = precision();
  const int64_t rows = 300, cols = 67, n = rows * cols;  // over several chunks and threads
  DeviceArrays d(*backend_);
  auto y = RoundedTo(RandomVector(n, 40), p.out), x = In(n, 41);
  const View yv = d.Data(y, p.out), y_want = d.F32(y);
  backend_->AddInPlace(yv, d.Data(x, p.in));
  ref_.AddInPlace(y_want, d.F32(x));
  Expect("elementwise", ScaledMaxDiff(d.Get(yv), d.Get(y_want)), tol().elementwise, "add");
  auto bias = In(cols, 42);
  const View bv = d.Data(y, p.out, {rows, cols}), b_want = d.F32(y, {rows, cols});
  backend_->AddBias(bv, d.Data(bias, p.in));
  ref_.AddBias(b_want, d.F32(bias));
  Expect("elementwise", ScaledMaxDiff(d.Get(bv), d.Get(b_want)), tol().elementwise, "bias");
  auto dy = Grad(n, 43), db = RandomVector(cols, 44);
  const View dbv = d.F32(db), db_want = d.F32(db);
  backend_->BiasBackward(d.Data(dy, p.grad, {rows, cols}), dbv);
  ref_.BiasBackward(d.F32(dy, {rows, cols}), db_want);
  Expect("reduction", ScaledMaxDiff(d.Get(dbv), d.Get(db_want)), tol().reduction_relative,
         "bias backward");
  // Conversions both ways: F32 -> data dtype rounds to nearest even, back is exact.
  auto src = RandomVector(n, 45);
  const View to = d.Data(std::vector<float>(n), p.in), back = d.F32(std::vector<float>(n));
  backend_->Convert(d.F32(src), to);
  backend_->Convert(to, back);
  EXPECT_EQ(d.Get(to), RoundedTo(src, p.in));
  EXPECT_EQ(d.Get(back), RoundedTo(src, p.in));
}

TEST_P(OpsHarness, DropoutDrawsTheReferenceMaskInPlaceOrNot) {
  if (!Runs(OpKind::kDropout)) return;
  const Precision& p = precision();
  const int64_t n = 70001;  // several chunks and threads, ragged
  auto x = In(n, 46);
  for (float prob : {0.0f, 0.05f, 0.5f}) {
    DeviceArrays d(*backend_);
    const View out = d.Data(std::vector<float>(n), p.out), want = d.F32(std::vector<float>(n));
    backend_->Dropout(d.Data(x, p.in), prob, 1234, out);
    ref_.Dropout(d.F32(x), prob, 1234, want);
    const auto got = d.Get(out), ref = d.Get(want);
    Expect("elementwise", ScaledMaxDiff(got, ref), tol().elementwise, "p=" + std::to_string(prob));
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; ++i) {
      // The same mask bit for bit: a zero exactly where the reference has one.
      ASSERT_EQ(got[i] == 0.0f, ref[i] == 0.0f) << "p=" << prob << " element " << i;
      dropped += ref[i] == 0.0f && x[i] != 0.0f;
    }
    // The mask's rate is p (binomial: 5 standard deviations).
    const double sd = std::sqrt(prob * (1 - prob) / n);
    EXPECT_NEAR(static_cast<double>(dropped) / n, prob, 5 * sd + 1e-9) << prob;
    // In place gives the same values, and another seed another mask.
    const View inplace = d.Data(x, p.in);
    backend_->Dropout(inplace, prob, 1234, inplace);
    EXPECT_EQ(d.Get(inplace), got);
    if (prob > 0) {
      backend_->Dropout(d.Data(x, p.in), prob, 1235, out);
      EXPECT_NE(d.Get(out), got);
    }
  }
}

// ---- row-wise: RMSNorm, SwiGLU, cross-entropy ---------------------------------------------

TEST_P(OpsHarness, RmsNormForwardBackward) {
  if (!Runs(OpKind::kRmsNormForward) || !Runs(OpKind::kRmsNormBackward)) return;
  const Precision& p = precision();
  for (auto [rows, dim] : std::vector<std::pair<int64_t, int64_t>>{{1, 8}, {37, 64}, {300, 130}}) {
    auto x = In(static_cast<size_t>(rows * dim), 6), w = In(static_cast<size_t>(dim), 7);
    auto dy = Grad(static_cast<size_t>(rows * dim), 8);
    DeviceArrays d(*backend_);
    const View xv = d.Data(x, p.in, {rows, dim}), wv = d.Data(w, p.in), xr = d.F32(x, {rows, dim});
    const View wr = d.F32(w);
    const View y = d.Data(std::vector<float>(rows * dim), p.out, {rows, dim});
    const View y_want = d.F32(std::vector<float>(rows * dim), {rows, dim});
    const View r = d.F32(std::vector<float>(rows)), r_want = d.F32(std::vector<float>(rows));
    backend_->RmsNormForward(xv, wv, 1e-5f, y, r);
    ref_.RmsNormForward(xr, wr, 1e-5f, y_want, r_want);
    const std::string what = std::to_string(rows) + "x" + std::to_string(dim);
    Expect("rmsnorm", ScaledMaxDiff(d.Get(y), d.Get(y_want)), tol().rowwise, what);
    Expect("rmsnorm", ScaledMaxDiff(d.Get(r), d.Get(r_want)), tol().rowwise, what);
    const std::vector<float> dx0 = RoundedTo(std::vector<float>(x.size(), 0.5f), p.grad);
    const View dx = d.Data(dx0, p.grad), dx_want = d.F32(dx0);
    const View dw = d.F32(std::vector<float>(dim, 0.25f));
    const View dw_want = d.F32(std::vector<float>(dim, 0.25f));
    backend_->RmsNormBackward(xv, wv, r_want, d.Data(dy, p.grad, {rows, dim}), dx, dw);
    ref_.RmsNormBackward(xr, wr, r_want, d.F32(dy, {rows, dim}), dx_want, dw_want);
    Expect("rmsnorm_bwd", ScaledMaxDiff(d.Get(dx), d.Get(dx_want)), tol().rowwise_backward, what);
    Expect("rmsnorm_bwd", ScaledMaxDiff(d.Get(dw), d.Get(dw_want)), tol().rowwise_backward, what);
  }
}

TEST_P(OpsHarness, SwigluForwardBackward) {
  if (!Runs(OpKind::kSwigluForward) || !Runs(OpKind::kSwigluBackward)) return;
  const Precision& p = precision();
  const int64_t n = 40000;  // large enough to be split over threads
  auto g = In(n, 9, 3.0f), u = In(n, 10), dout = Grad(n, 11);
  DeviceArrays d(*backend_);
  const View gv = d.Data(g, p.in), uv = d.Data(u, p.in), gr = d.F32(g), ur = d.F32(u);
  const View o = d.Data(std::vector<float>(n), p.out), o_want = d.F32(std::vector<float>(n));
  backend_->SwigluForward(gv, uv, o);
  ref_.SwigluForward(gr, ur, o_want);
  Expect("swiglu", ScaledMaxDiff(d.Get(o), d.Get(o_want)), tol().rowwise, "forward");
  const auto ones = RoundedTo(std::vector<float>(n, 1.0f), p.grad);
  const View dg = d.Data(ones, p.grad), du = d.Data(std::vector<float>(n), p.grad);
  const View dg_want = d.F32(ones), du_want = d.F32(std::vector<float>(n));
  backend_->SwigluBackward(gv, uv, d.Data(dout, p.grad), dg, du);
  ref_.SwigluBackward(gr, ur, d.F32(dout), dg_want, du_want);
  Expect("swiglu_bwd", ScaledMaxDiff(d.Get(dg), d.Get(dg_want)), tol().rowwise_backward, "dgate");
  Expect("swiglu_bwd", ScaledMaxDiff(d.Get(du), d.Get(du_want)), tol().rowwise_backward, "dup");
}

TEST_P(OpsHarness, CrossEntropyForwardBackwardWithIgnoredRows) {
  if (!Runs(OpKind::kCrossEntropyForward) || !Runs(OpKind::kCrossEntropyBackward)) return;
  const Precision& p = precision();
  const int64_t n = 50, vocab = 1001;
  auto logits = In(static_cast<size_t>(n * vocab), 12, 4.0f);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = i % 7 == 0 ? kIgnoreIndex : (i * 37) % vocab;
  DeviceArrays d(*backend_);
  const View lv = d.Data(logits, p.in, {n, vocab}), lr = d.F32(logits, {n, vocab});
  const View tv = d.I32(targets);
  const View lse = d.F32(std::vector<float>(n)), lse_want = d.F32(std::vector<float>(n));
  const View loss = d.F64(0.5), loss_want = d.F64(0.5);  // the op accumulates
  backend_->CrossEntropyForward(lv, tv, lse, loss);
  ref_.CrossEntropyForward(lr, tv, lse_want, loss_want);
  Expect("reduction", std::fabs(d.Scalar(loss) - d.Scalar(loss_want)) / d.Scalar(loss_want),
         tol().reduction_relative, "loss sum");
  Expect("rowwise", ScaledMaxDiff(d.Get(lse), d.Get(lse_want)), tol().rowwise, "lse");
  backend_->CrossEntropyBackward(lv, tv, lse_want, 0.1f, lv);  // in place
  ref_.CrossEntropyBackward(lr, tv, lse_want, 0.1f, lr);
  const auto got = d.Get(lv);
  Expect("ce_grad", ScaledMaxDiff(got, d.Get(lr)), tol().cross_entropy_grad, "dlogits");
  for (int64_t c = 0; c < vocab; ++c) ASSERT_EQ(got[c], 0.0f) << "ignored row 0 has grads";
}

// ---- attention ----------------------------------------------------------------------------

struct AttentionCase {
  int64_t batch, q_len, kv_len, q_heads, kv_heads, head_dim, q_offset, window;
  bool segments;
  bool sinks = false;  // GPT-OSS's learned sink logit per head
};

TEST_P(OpsHarness, AttentionForwardBackward) {
  if (!Runs(OpKind::kAttentionForward) || !Runs(OpKind::kAttentionBackward)) return;
  const Precision& pr = precision();
  for (const AttentionCase& p :
       {AttentionCase{1, 1, 1, 1, 1, 2, 0, 0, false},
        AttentionCase{2, 17, 17, 4, 2, 16, 0, 0, false},           // GQA
        AttentionCase{1, 150, 150, 2, 1, 32, 0, 0, false},         // several q blocks
        AttentionCase{2, 70, 70, 4, 4, 8, 0, 5, false},            // sliding window
        AttentionCase{2, 40, 40, 6, 2, 16, 0, 0, true},            // packed segments
        AttentionCase{1, 200, 200, 2, 1, 16, 0, 0, true},          // blocks in one segment, mixed
        AttentionCase{2, 3, 20, 4, 2, 16, 17, 0, false},           // KV-cache step
        AttentionCase{1, 1, 90, 2, 1, 8, 89, 7, false},            // decode + window
        AttentionCase{2, 70, 70, 4, 2, 16, 0, 8, false, true},     // sinks, GQA, window
        AttentionCase{2, 40, 40, 4, 2, 16, 0, 0, true, true},      // sinks, segments
        AttentionCase{2, 3, 20, 4, 2, 16, 17, 8, false, true}}) {  // sinks, KV-cache step
    AttentionShape s;
    s.batch = p.batch;
    s.q_len = p.q_len;
    s.kv_len = p.kv_len;
    s.q_heads = p.q_heads;
    s.kv_heads = p.kv_heads;
    s.head_dim = p.head_dim;
    s.q_offset = p.q_offset;
    s.sliding_window = p.window;
    s.scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
    const size_t q_size = static_cast<size_t>(p.batch * p.q_len * p.q_heads * p.head_dim);
    const size_t kv_size = static_cast<size_t>(p.batch * p.kv_len * p.kv_heads * p.head_dim);
    auto q = In(q_size, 13), k = In(kv_size, 14), v = In(kv_size, 15), dout = Grad(q_size, 16);
    auto sinks = In(static_cast<size_t>(p.q_heads), 17, 2.0f);
    std::vector<int32_t> q_seg, kv_seg;
    if (p.segments) {  // two documents per row; the second starts a third of the way in
      for (int64_t b = 0; b < p.batch; ++b) {
        for (int64_t j = 0; j < p.kv_len; ++j) kv_seg.push_back(j < p.kv_len / 3 ? 1 : 2);
        for (int64_t i = 0; i < p.q_len; ++i)
          q_seg.push_back(p.q_offset + i < p.kv_len / 3 ? 1 : 2);
      }
    }
    DeviceArrays d(*backend_);
    const View qs = p.segments ? d.I32(q_seg) : View(), ks = p.segments ? d.I32(kv_seg) : View();
    const size_t lse_size = static_cast<size_t>(p.batch * p.q_heads * p.q_len);
    const View qv = d.Data(q, pr.in), kv = d.Data(k, pr.in), vv = d.Data(v, pr.in);
    const View qr = d.F32(q), kr = d.F32(k), vr = d.F32(v);
    const View sv = p.sinks ? d.Data(sinks, pr.in) : View(), sr = p.sinks ? d.F32(sinks) : View();
    const View o = d.Data(std::vector<float>(q_size), pr.out),
               o_want = d.F32(std::vector<float>(q_size));
    const View l = d.F32(std::vector<float>(lse_size)),
               l_want = d.F32(std::vector<float>(lse_size));
    backend_->AttentionForward(s, qv, kv, vv, sv, qs, ks, o, l);
    ref_.AttentionForward(s, qr, kr, vr, sr, qs, ks, o_want, l_want);
    const double fwd =
        std::max(ScaledMaxDiff(d.Get(o), d.Get(o_want)), ScaledMaxDiff(d.Get(l), d.Get(l_want)));
    const std::string what = "B" + std::to_string(p.batch) + " Tq" + std::to_string(p.q_len) +
                             " Tk" + std::to_string(p.kv_len) + (p.sinks ? " sinks" : "");
    Expect("attention", fwd, tol().attention, what);
    const auto dq0 = RoundedTo(std::vector<float>(q_size, 0.1f), pr.grad);
    const View dq = d.Data(dq0, pr.grad), dk = d.Data(std::vector<float>(kv_size), pr.grad);
    const View dv = d.Data(std::vector<float>(kv_size), pr.grad);
    const View dq_want = d.F32(dq0), dk_want = d.F32(std::vector<float>(kv_size));
    const View dv_want = d.F32(std::vector<float>(kv_size));
    const auto ds0 = std::vector<float>(static_cast<size_t>(p.q_heads), 0.25f);
    const View ds = p.sinks ? d.F32(ds0) : View(), ds_want = p.sinks ? d.F32(ds0) : View();
    // Both backwards read the reference's forward output (its own output would differ by the
    // forward's rounding, which the forward check above already measured).
    const View o_in = d.Data(d.Get(o_want), pr.out);
    backend_->AttentionBackward(s, qv, kv, vv, sv, qs, ks, o_in, l_want, d.Data(dout, pr.grad), dq,
                                dk, dv, ds);
    ref_.AttentionBackward(s, qr, kr, vr, sr, qs, ks, d.F32(d.Get(o_in)), l_want, d.F32(dout),
                           dq_want, dk_want, dv_want, ds_want);
    double bwd = std::max({ScaledMaxDiff(d.Get(dq), d.Get(dq_want)),
                           ScaledMaxDiff(d.Get(dk), d.Get(dk_want)),
                           ScaledMaxDiff(d.Get(dv), d.Get(dv_want))});
    if (p.sinks) bwd = std::max(bwd, ScaledMaxDiff(d.Get(ds), d.Get(ds_want)));
    Expect("attention_bwd", bwd, tol().attention_backward, what);
  }
}

// ---- optimizer (master state: F32 only) ---------------------------------------------------

TEST_P(OpsHarness, AdamWUpdateMatchesTheReference) {
  if (!Runs(OpKind::kAdamWUpdate)) return;
  // Sizes: below one thread's chunk, ragged over several chunks and vectors.
  for (int64_t n : {1, 17, 100003}) {
    for (bool decay : {false, true}) {
      for (float grad_scale : {1.0f, 0.37f}) {
        AdamWScalars s;
        s.grad_scale = grad_scale;
        s.step_size = 1e-3f / 0.19f;
        s.bias_correction2_sqrt = 0.0446f;
        s.decay = decay;
        s.decay_factor = 1.0f - 1e-3f * 0.1f;
        const auto g = RandomVector(static_cast<size_t>(n), 11);
        auto p0 = RandomVector(static_cast<size_t>(n), 12);
        auto m0 = RandomVector(static_cast<size_t>(n), 13, 0.1f);
        auto v0 = RandomVector(static_cast<size_t>(n), 14, 0.1f);
        for (auto& x : v0) x = x * x;
        DeviceArrays d(*backend_);
        const View p = d.F32(p0), gv = d.F32(g), m = d.F32(m0), v = d.F32(v0);
        const View pr = d.F32(p0), gr = d.F32(g), mr = d.F32(m0), vr = d.F32(v0);
        for (int step = 0; step < 3; ++step) {
          ref_.AdamWUpdate(s, pr, gr, mr, vr);
          backend_->AdamWUpdate(s, p, gv, m, v);
        }
        const std::string what = std::to_string(n) + (decay ? " decay" : "") + " grad_scale " +
                                 std::to_string(grad_scale);
        if (tol().optimizer_exact) {
          EXPECT_EQ(d.Get(p), d.Get(pr)) << what;
          EXPECT_EQ(d.Get(m), d.Get(mr)) << what;
          EXPECT_EQ(d.Get(v), d.Get(vr)) << what;
        }
        Expect("adamw", ScaledMaxDiff(d.Get(p), d.Get(pr)), tol().rowwise, what);
        // With the compute copy written in the same pass: p, m and v as without it, and the
        // copy as Convert writes the updated p.
        for (DType copy_dtype : {DType::kBF16, DType::kF32}) {
          if (!backend_->Supports(OpKind::kConvert, copy_dtype)) continue;
          const View p2 = d.F32(p0), g2 = d.F32(g), m2 = d.F32(m0), v2 = d.F32(v0);
          const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
          const View copy = d.Data(zeros, copy_dtype), want = d.Data(zeros, copy_dtype);
          for (int step = 0; step < 3; ++step) backend_->AdamWUpdate(s, p2, g2, m2, v2, copy);
          EXPECT_EQ(d.Get(p2), d.Get(p)) << what;
          EXPECT_EQ(d.Get(m2), d.Get(m)) << what;
          EXPECT_EQ(d.Get(v2), d.Get(v)) << what;
          backend_->Convert(p2, want);
          EXPECT_EQ(d.Get(copy), d.Get(want)) << what << ", copy in " << DTypeName(copy_dtype);
        }
        if (grad_scale != 1.0f) {  // the bits of scaling the gradient in place first
          const View p1 = d.F32(p0), g1 = d.F32(g), m1 = d.F32(m0), v1 = d.F32(v0);
          AdamWScalars unscaled = s;
          unscaled.grad_scale = 1.0f;
          backend_->Scale(g1, grad_scale);
          for (int step = 0; step < 3; ++step) backend_->AdamWUpdate(unscaled, p1, g1, m1, v1);
          EXPECT_EQ(d.Get(p1), d.Get(p)) << what;
          EXPECT_EQ(d.Get(m1), d.Get(m)) << what;
          EXPECT_EQ(d.Get(v1), d.Get(v)) << what;
        }
      }
    }
  }
}

TEST_P(OpsHarness, SumOfSquaresAccumulatesAndScale) {
  if (!Runs(OpKind::kSumOfSquares) || !Runs(OpKind::kScale)) return;
  for (int64_t n : {1, 31, 250001}) {
    auto x = RandomVector(static_cast<size_t>(n), 21, 3.0f);
    DeviceArrays d(*backend_);
    const View xv = d.F32(x), xr = d.F32(x);
    const View sum = d.F64(0.5), again = d.F64(0.5), want = d.F64(0.5);  // accumulated into
    backend_->SumOfSquares(xv, sum);
    backend_->SumOfSquares(xv, again);
    ref_.SumOfSquares(xr, want);
    Expect("reduction", std::fabs(d.Scalar(sum) - d.Scalar(want)) / d.Scalar(want),
           tol().reduction_relative, std::to_string(n));
    EXPECT_EQ(d.Scalar(sum), d.Scalar(again)) << "not deterministic, n=" << n;
    // The same bits on other thread counts (the pieces' partial sums are added in order).
    for (int threads : {1, 3}) {
      const auto other = testing::MakeBackend(std::get<0>(GetParam()).options.kind, threads);
      DeviceArrays od(*other);
      const View ox = od.F32(x), osum = od.F64(0.5);
      other->SumOfSquares(ox, osum);
      EXPECT_EQ(od.Scalar(osum), d.Scalar(sum)) << threads << " threads, n=" << n;
    }
    ref_.Scale(xr, 0.37f);
    backend_->Scale(xv, 0.37f);
    if (tol().optimizer_exact) {
      EXPECT_EQ(d.Get(xv), d.Get(xr)) << n;
    }
  }
}

TEST_P(OpsHarness, MemoryCallsCopyFillAndZero) {
  const DType dtype = precision().in;
  View v;
  auto buffer = backend_->AllocateView(dtype, {2, 3}, &v);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(v.device(), backend_->device());
  backend_->FromHostTensor(v, std::vector<float>{1, 2, 3, 4, 5, 6}.data());
  backend_->Copy(v.Rows(0, 1), v.Rows(1, 1));
  DeviceArrays d(*backend_);
  EXPECT_EQ(d.Get(v), (std::vector<float>{4, 5, 6, 4, 5, 6}));
  backend_->Fill(v.Rows(1, 1), 2.5f);
  backend_->Zero(v.Rows(0, 1));
  backend_->Synchronize();
  EXPECT_EQ(d.Get(v), (std::vector<float>{0, 0, 0, 2.5f, 2.5f, 2.5f}));

  // A large view (a step's gradients) at an odd size and offset: every element of it becomes 0,
  // none around it changes.
  const int64_t rows = 1000, cols = 1237;
  View big;
  auto big_buffer = backend_->AllocateView(dtype, {rows, cols}, &big);
  ASSERT_TRUE(big_buffer.ok());
  backend_->Fill(big, 7.0f);
  backend_->Zero(big.Flat().Slice(3, rows * cols - 5));
  backend_->Synchronize();
  const std::vector<float> values = d.Get(big);
  int64_t zeros = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const bool inside = i >= 3 && i < static_cast<size_t>(rows * cols - 2);
    EXPECT_EQ(values[i], inside ? 0.0f : 7.0f) << i;
    zeros += values[i] == 0.0f;
    if (values[i] != (inside ? 0.0f : 7.0f)) break;
  }
  EXPECT_EQ(zeros, rows * cols - 5);
}

INSTANTIATE_TEST_SUITE_P(Backends, OpsHarness,
                         ::testing::Combine(::testing::ValuesIn(RegisteredBackends(3)),
                                            ::testing::ValuesIn(testing::Precisions())),
                         testing::CaseName);

TEST(OpsHarnessCoverage, EveryOpHasAHarnessTest) {
  // The harness's tests above name every op; a new op in ops.h must get one (and this list).
  const std::set<OpKind> covered = {
      OpKind::kGemm, OpKind::kEmbeddingForward, OpKind::kEmbeddingBackward, OpKind::kRmsNormForward,
      OpKind::kRmsNormBackward, OpKind::kRopeTables, OpKind::kRopeForward, OpKind::kRopeBackward,
      OpKind::kAttentionForward, OpKind::kAttentionBackward, OpKind::kSwigluForward,
      OpKind::kSwigluBackward, OpKind::kAddInPlace, OpKind::kAddBias, OpKind::kBiasBackward,
      OpKind::kCrossEntropyForward, OpKind::kCrossEntropyBackward, OpKind::kAdamWUpdate,
      OpKind::kSumOfSquares, OpKind::kScale, OpKind::kConvert, OpKind::kDropout,
      // ops_harness_moe_test.cc:
      OpKind::kClampedSwigluForward, OpKind::kClampedSwigluBackward, OpKind::kRouterTopK,
      OpKind::kRouterTopKBackward, OpKind::kMoeDispatch, OpKind::kMoeGather,
      OpKind::kMoeGatherBackward, OpKind::kMoeCombine, OpKind::kMoeCombineBackward};
  for (OpKind op : kAllOps) EXPECT_TRUE(covered.count(op)) << OpName(op) << " has no harness test";
  EXPECT_EQ(covered.size(), std::size(kAllOps));
}

TEST(ThreadPool, CoversTheRangeExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 3, 4, 5, 1000}) {
    std::vector<int> hits(static_cast<size_t>(n), 0);
    pool.ParallelFor(n, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (int h : hits) ASSERT_EQ(h, 1);
  }
}

TEST(BackendRegistry, KnowsItsKinds) {
  EXPECT_EQ((*CreateBackend({"reference", 0}))->name(), "reference");
  EXPECT_EQ((*CreateBackend({"fast", 2}))->name(), "fast");
  const Status unknown = CreateBackend({"cuda", 0}).status();
  EXPECT_EQ(unknown.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("valid backends are fast, reference"), std::string::npos);
  EXPECT_FALSE(IsKnownBackendKind("cuda"));
  const auto registered = RegisteredBackends(2);
  ASSERT_EQ(registered.size(), 2u);
  EXPECT_EQ(registered[0].name, "reference");
  EXPECT_EQ(registered[1].name.rfind("fast/", 0), 0u);
}

TEST(BackendSupport, AnUnsupportedCombinationIsAnErrorNamingTheOp) {
  const auto backend = testing::MakeBackend("fast", 1);
  EXPECT_TRUE(CheckOpsSupport(*backend, kAllOps, DType::kF32, "fp32 training").ok());
  const OpKind master[] = {OpKind::kAdamWUpdate};
  const Status s = CheckOpsSupport(*backend, master, DType::kBF16, "bf16 optimizer");
  EXPECT_EQ(s.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(s.message().find("no BF16 AdamWUpdate op"), std::string::npos) << s.message();
  const OpKind gemm[] = {OpKind::kGemm};
  EXPECT_FALSE(CheckOpsSupport(*backend, gemm, DType::kF16, "fp16 training").ok());
}

}  // namespace
}  // namespace air::engine
