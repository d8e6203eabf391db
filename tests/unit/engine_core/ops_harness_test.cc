// The per-op harness (ggml's test-backend-ops): EVERY op of ops.h, on every registered backend
// (backend/registry.h: the CPU reference itself, the fast CPU kernels at the level this process
// selects — ctest runs this binary again under AIR_CPU_KERNELS=avx2 and =generic — and again
// with the bf16 GEMM on each other path this CPU runs: onednn, avx512, ...), in every data
// dtype the backend supports, against the fp32 reference (ReferenceOps on F32 views of the same
// inputs, rounded to the tested dtype first). Three precisions:
//   f32            every data argument F32
//   bf16           every data argument BF16 (outputs rounded once)
//   bf16+f32grad   the mixed-precision model's pattern: activations and weights BF16, the
//                  gradients an op accumulates into (and GEMM's dy operand) F32
// Each side computes in its own memory: the tested backend's inputs and outputs are allocated,
// uploaded and read back through it (as a GPU backend needs), the reference's through the
// reference, from the same host values; results meet only as host copies (Sides,
// ops_harness.h). The shapes include ragged sizes that hit the edge paths of the blocked kernels
// and the head sizes of real models. Each backend is held to its declared tolerances for the dtype,
// and the measured worst error of each op family is printed. An op a backend does not support in a
// dtype is printed as such, never silently passed over.
#include "ops_harness.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "engine/backend/cpu/gemm_path.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/cpu/thread_pool.h"
#include "engine/backend/registry.h"
#include "engine/data/batch.h"

namespace air::engine {
namespace {

using testing::DeviceArrays;
using testing::OpsHarness;
using testing::Pair;
using testing::Precision;
using testing::RandomVector;
using testing::RoundedTo;
using testing::ScaledMaxDiff;
using testing::Sides;

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
          auto c0 = RoundedTo(RandomVector(static_cast<size_t>(m * n), 3), c_dtype);
          Sides d(*backend_, ref_);
          const Pair av = d.Data(a, a_dtype), bv = d.Data(b, b_dtype), c = d.Data(c0, c_dtype);
          backend_->Gemm(ta, tb, m, n, k, av.got, lda, bv.got, ldb, beta, c.got, n);
          ref_.Gemm(ta, tb, m, n, k, av.want, lda, bv.want, ldb, beta, c.want, n);
          Expect("gemm/sqrt(k)", d.Error(c) / std::sqrt(double(k)), tol().gemm_per_sqrt_k,
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
  // The operands in the precision, and F32 (an fp32 product into the output dtype).
  for (const DType operands : {p.in, DType::kF32}) {
    Sides d(*backend_, ref_);
    const Pair av = d.Data(a, operands), bv = d.Data(b, operands), c = d.Data(c_init, p.out);
    ref_.Gemm(false, true, m, n, k, av.want, k + pad, bv.want, k + pad, 0.0f, c.want, n + pad);
    backend_->Gemm(false, true, m, n, k, av.got, k + pad, bv.got, k + pad, 0.0f, c.got, n + pad);
    const auto got = d.Got(c), ref = d.Want(c);
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
  Sides d(*backend_, ref_);
  const Pair idv = d.I32(ids), tv = d.Data(table, p.in, {vocab, dim});
  const Pair out = d.Data(std::vector<float>(n * dim), p.out, {n, dim});
  backend_->EmbeddingForward(idv.got, tv.got, out.got);
  ref_.EmbeddingForward(idv.want, tv.want, out.want);
  Expect("elementwise", d.Error(out), tol().elementwise, "forward");
  auto dout = Grad(static_cast<size_t>(n * dim), 31);
  // The table's gradient in the gradient dtype (BF16: a bf16-state run's).
  auto init = RoundedTo(RandomVector(static_cast<size_t>(vocab * dim), 32), p.grad);
  const Pair dov = d.Data(dout, p.grad, {n, dim});
  for (int32_t skip : {-1, 5}) {
    const Pair dt = d.Data(init, p.grad, {vocab, dim});
    backend_->EmbeddingBackward(idv.got, dov.got, skip, dt.got);
    ref_.EmbeddingBackward(idv.want, dov.want, skip, dt.want);
    Expect("elementwise", d.Error(dt), tol().elementwise, "backward skip " + std::to_string(skip));
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
  Sides d(*backend_, ref_);
  const Pair pos = d.I32(positions), inv = d.F32(inv_freq);
  const Pair cos = d.F32(std::vector<float>(n * half), {n, half});
  const Pair sin = d.F32(std::vector<float>(n * half), {n, half});
  // YaRN's attention factor scales the tables (1 leaves them alone).
  for (float scale : {1.3465736f, 1.0f}) {
    backend_->RopeTables(pos.got, inv.got, scale, cos.got, sin.got);
    ref_.RopeTables(pos.want, inv.want, scale, cos.want, sin.want);
    Expect("elementwise", d.Error(cos), tol().elementwise, "cos");
    Expect("elementwise", d.Error(sin), tol().elementwise, "sin");
  }
  // The rotations read the reference's tables on both sides.
  const Pair cos_ref = d.FromWant(cos, DType::kF32), sin_ref = d.FromWant(sin, DType::kF32);
  auto x = In(static_cast<size_t>(n * heads * head_dim), 33);
  const Pair xv = d.Data(x, p.in, {n, heads * head_dim});
  backend_->RopeForward(xv.got, cos_ref.got, sin_ref.got);
  ref_.RopeForward(xv.want, cos_ref.want, sin_ref.want);
  Expect("elementwise", d.Error(xv), tol().elementwise, "forward");
  auto dx = Grad(static_cast<size_t>(n * heads * head_dim), 34);
  const Pair dxv = d.Data(dx, p.grad);
  backend_->RopeBackward(dxv.got, cos_ref.got, sin_ref.got);
  ref_.RopeBackward(dxv.want, cos_ref.want, sin_ref.want);
  Expect("elementwise", d.Error(dxv), tol().elementwise, "backward");
}

TEST_P(OpsHarness, AddInPlaceAddBiasBiasBackwardConvert) {
  for (OpKind op :
       {OpKind::kAddInPlace, OpKind::kAddBias, OpKind::kBiasBackward, OpKind::kConvert}) {
    if (!Runs(op)) return;
  }
  const Precision& p = precision();
  // Over several chunks and threads; ragged rows, then rows of whole vectors.
  for (const int64_t cols : {67, 64}) {
    const int64_t rows = 300, n = rows * cols;
    Sides d(*backend_, ref_);
    auto y = RoundedTo(RandomVector(n, 40), p.out), x = In(n, 41);
    const Pair yv = d.Data(y, p.out), xv = d.Data(x, p.in);
    backend_->AddInPlace(yv.got, xv.got);
    ref_.AddInPlace(yv.want, xv.want);
    Expect("elementwise", d.Error(yv), tol().elementwise, "add");
    auto bias = In(cols, 42);
    const Pair bv = d.Data(y, p.out, {rows, cols}), biasv = d.Data(bias, p.in);
    backend_->AddBias(bv.got, biasv.got);
    ref_.AddBias(bv.want, biasv.want);
    Expect("elementwise", d.Error(bv), tol().elementwise, "bias");
    auto dy = Grad(n, 43), db = RoundedTo(RandomVector(cols, 44), p.grad);
    const Pair dbv = d.Data(db, p.grad), dyv = d.Data(dy, p.grad, {rows, cols});
    backend_->BiasBackward(dyv.got, dbv.got);
    ref_.BiasBackward(dyv.want, dbv.want);
    // An F32 sum differs from the reference's by the order of its sums; a BF16 one by a rounding.
    if (p.grad == DType::kF32) {
      Expect("reduction", d.Error(dbv), tol().reduction_relative, "bias backward");
    } else {
      Expect("elementwise", d.Error(dbv), tol().elementwise, "bias backward (bf16)");
    }
    // Conversions both ways: F32 -> data dtype rounds to nearest even, back is exact.
    DeviceArrays t(*backend_);
    auto src = RandomVector(n, 45);
    const View to = t.Data(std::vector<float>(n), p.in), back = t.F32(std::vector<float>(n));
    backend_->Convert(t.F32(src), to);
    backend_->Convert(to, back);
    EXPECT_EQ(t.Get(to), RoundedTo(src, p.in));
    EXPECT_EQ(t.Get(back), RoundedTo(src, p.in));
  }
}

TEST_P(OpsHarness, DropoutDrawsTheReferenceMaskInPlaceOrNot) {
  if (!Runs(OpKind::kDropout)) return;
  const Precision& p = precision();
  const int64_t n = 70001;  // several chunks and threads, ragged
  auto x = In(n, 46);
  for (float prob : {0.0f, 0.05f, 0.5f}) {
    Sides d(*backend_, ref_);
    const Pair xv = d.Data(x, p.in), out = d.Data(std::vector<float>(n), p.out);
    backend_->Dropout(xv.got, prob, 1234, out.got);
    ref_.Dropout(xv.want, prob, 1234, out.want);
    const auto got = d.Got(out), ref = d.Want(out);
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
    DeviceArrays t(*backend_);
    const View inplace = t.Data(x, p.in);
    backend_->Dropout(inplace, prob, 1234, inplace);
    EXPECT_EQ(t.Get(inplace), got);
    if (prob > 0) {
      backend_->Dropout(xv.got, prob, 1235, out.got);
      EXPECT_NE(d.Got(out), got);
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
    Sides d(*backend_, ref_);
    const Pair xv = d.Data(x, p.in, {rows, dim}), wv = d.Data(w, p.in);
    const Pair y = d.Data(std::vector<float>(rows * dim), p.out, {rows, dim});
    const Pair r = d.F32(std::vector<float>(rows));
    backend_->RmsNormForward(xv.got, wv.got, 1e-5f, y.got, r.got);
    ref_.RmsNormForward(xv.want, wv.want, 1e-5f, y.want, r.want);
    const std::string what = std::to_string(rows) + "x" + std::to_string(dim);
    Expect("rmsnorm", d.Error(y), tol().rowwise, what);
    Expect("rmsnorm", d.Error(r), tol().rowwise, what);
    // Both backwards read the reference's rstd.
    const Pair r_ref = d.FromWant(r, DType::kF32);
    const std::vector<float> dx0 = RoundedTo(std::vector<float>(x.size(), 0.5f), p.grad);
    const Pair dx = d.Data(dx0, p.grad), dw = d.Data(std::vector<float>(dim, 0.25f), p.grad);
    const Pair dyv = d.Data(dy, p.grad, {rows, dim});
    backend_->RmsNormBackward(xv.got, wv.got, r_ref.got, dyv.got, dx.got, dw.got);
    ref_.RmsNormBackward(xv.want, wv.want, r_ref.want, dyv.want, dx.want, dw.want);
    Expect("rmsnorm_bwd", d.Error(dx), tol().rowwise_backward, what);
    Expect("rmsnorm_bwd", d.Error(dw), tol().rowwise_backward, what);
  }
}

TEST_P(OpsHarness, SwigluForwardBackward) {
  if (!Runs(OpKind::kSwigluForward) || !Runs(OpKind::kSwigluBackward)) return;
  const Precision& p = precision();
  const int64_t n = 40000;  // large enough to be split over threads
  auto g = In(n, 9, 3.0f), u = In(n, 10), dout = Grad(n, 11);
  Sides d(*backend_, ref_);
  const Pair gv = d.Data(g, p.in), uv = d.Data(u, p.in), o = d.Data(std::vector<float>(n), p.out);
  backend_->SwigluForward(gv.got, uv.got, o.got);
  ref_.SwigluForward(gv.want, uv.want, o.want);
  Expect("swiglu", d.Error(o), tol().rowwise, "forward");
  const auto ones = RoundedTo(std::vector<float>(n, 1.0f), p.grad);
  const Pair dg = d.Data(ones, p.grad), du = d.Data(std::vector<float>(n), p.grad);
  const Pair dov = d.Data(dout, p.grad);
  backend_->SwigluBackward(gv.got, uv.got, dov.got, dg.got, du.got);
  ref_.SwigluBackward(gv.want, uv.want, dov.want, dg.want, du.want);
  Expect("swiglu_bwd", d.Error(dg), tol().rowwise_backward, "dgate");
  Expect("swiglu_bwd", d.Error(du), tol().rowwise_backward, "dup");
}

TEST_P(OpsHarness, CrossEntropyForwardBackwardWithIgnoredRows) {
  if (!Runs(OpKind::kCrossEntropyForward) || !Runs(OpKind::kCrossEntropyBackward)) return;
  const Precision& p = precision();
  for (const int64_t vocab : {1001, 1024}) {  // ragged rows, and rows of whole vectors
    const int64_t n = 50;
    auto logits = In(static_cast<size_t>(n * vocab), 12, 4.0f);
    std::vector<int32_t> targets(n);
    for (int64_t i = 0; i < n; ++i) targets[i] = i % 7 == 0 ? kIgnoreIndex : (i * 37) % vocab;
    Sides d(*backend_, ref_);
    const Pair lv = d.Data(logits, p.in, {n, vocab}), tv = d.I32(targets);
    const Pair lse = d.F32(std::vector<float>(n));
    const Pair loss = d.F64(0.5);  // the op accumulates
    backend_->CrossEntropyForward(lv.got, tv.got, lse.got, loss.got);
    ref_.CrossEntropyForward(lv.want, tv.want, lse.want, loss.want);
    Expect("reduction", std::fabs(d.GotScalar(loss) - d.WantScalar(loss)) / d.WantScalar(loss),
           tol().reduction_relative, "loss sum");
    Expect("rowwise", d.Error(lse), tol().rowwise, "lse");
    // Both backwards read the reference's lse, and write over the logits (in place).
    const Pair lse_ref = d.FromWant(lse, DType::kF32);
    backend_->CrossEntropyBackward(lv.got, tv.got, lse_ref.got, 0.1f, lv.got);
    ref_.CrossEntropyBackward(lv.want, tv.want, lse_ref.want, 0.1f, lv.want);
    const auto got = d.Got(lv);
    Expect("ce_grad", ScaledMaxDiff(got, d.Want(lv)), tol().cross_entropy_grad, "dlogits");
    for (int64_t c = 0; c < vocab; ++c) ASSERT_EQ(got[c], 0.0f) << "ignored row 0 has grads";
  }
}

// ---- attention ----------------------------------------------------------------------------

struct AttentionCase {
  int64_t batch, q_len, kv_len, q_heads, kv_heads, head_dim, q_offset, window;
  bool segments;
  bool sinks = false;  // GPT-OSS's learned sink logit per head
};

// Tiles of 64 or 128 queries (fast_attention.cc); on the avx512bf16 path products banded by
// the causal and window limits (attention_gemm.h): 257 and 140 x 173 reach their edges.
TEST_P(OpsHarness, AttentionForwardBackward) {
  if (!Runs(OpKind::kAttentionForward) || !Runs(OpKind::kAttentionBackward)) return;
  const Precision& pr = precision();
  for (const AttentionCase& p :
       {AttentionCase{1, 1, 1, 1, 1, 2, 0, 0, false},
        AttentionCase{2, 17, 17, 4, 2, 16, 0, 0, false},         // GQA
        AttentionCase{1, 150, 150, 2, 1, 32, 0, 0, false},       // several q blocks
        AttentionCase{2, 70, 70, 4, 4, 8, 0, 5, false},          // sliding window
        AttentionCase{2, 40, 40, 6, 2, 16, 0, 0, true},          // packed segments
        AttentionCase{1, 200, 200, 2, 1, 16, 0, 0, true},        // blocks in one segment, mixed
        AttentionCase{2, 3, 20, 4, 2, 16, 17, 0, false},         // KV-cache step
        AttentionCase{1, 1, 90, 2, 1, 8, 89, 7, false},          // decode + window
        AttentionCase{2, 70, 70, 4, 2, 16, 0, 8, false, true},   // sinks, GQA, window
        AttentionCase{2, 40, 40, 4, 2, 16, 0, 0, true, true},    // sinks, segments
        AttentionCase{2, 3, 20, 4, 2, 16, 17, 8, false, true},   // sinks, KV-cache step
        AttentionCase{1, 200, 200, 8, 2, 64, 0, 0, false},       // head_dim 64, GQA 4
        AttentionCase{2, 130, 130, 4, 1, 128, 0, 0, true},       // head_dim 128, segments
        AttentionCase{1, 96, 96, 2, 2, 128, 0, 40, false},       // head_dim 128, window
        AttentionCase{1, 257, 257, 4, 2, 64, 0, 0, false},       // a 1-query tile, odd keys
        AttentionCase{2, 140, 173, 2, 1, 32, 33, 45, true},      // window ends mid column tile
        AttentionCase{1, 300, 300, 2, 1, 64, 0, 150, false}}) {  // whole tiles in a window
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
    Sides d(*backend_, ref_);
    const Pair qs = p.segments ? d.I32(q_seg) : Pair{}, ks = p.segments ? d.I32(kv_seg) : Pair{};
    const size_t lse_size = static_cast<size_t>(p.batch * p.q_heads * p.q_len);
    const Pair qv = d.Data(q, pr.in), kv = d.Data(k, pr.in), vv = d.Data(v, pr.in);
    const Pair sv = p.sinks ? d.Data(sinks, pr.in) : Pair{};
    const Pair o = d.Data(std::vector<float>(q_size), pr.out);
    const Pair l = d.F32(std::vector<float>(lse_size));
    backend_->AttentionForward(s, qv.got, kv.got, vv.got, sv.got, qs.got, ks.got, o.got, l.got);
    ref_.AttentionForward(s, qv.want, kv.want, vv.want, sv.want, qs.want, ks.want, o.want, l.want);
    const double fwd = std::max(d.Error(o), d.Error(l));
    const std::string what = "B" + std::to_string(p.batch) + " Tq" + std::to_string(p.q_len) +
                             " Tk" + std::to_string(p.kv_len) + " D" + std::to_string(p.head_dim) +
                             (p.sinks ? " sinks" : "");
    Expect("attention", fwd, tol().attention, what);
    // dO in the gradients' dtype, and in the outputs' (the models' layout: the attention
    // output's gradient in the compute dtype, its q, k, v gradients F32) where they differ.
    for (const DType dout_dtype : {pr.grad, pr.out}) {
      if (dout_dtype == pr.out && pr.out == pr.grad) continue;
      const auto dq0 = RoundedTo(std::vector<float>(q_size, 0.1f), pr.grad);
      const Pair dq = d.Data(dq0, pr.grad), dk = d.Data(std::vector<float>(kv_size), pr.grad);
      const Pair dv = d.Data(std::vector<float>(kv_size), pr.grad);
      const auto ds0 = std::vector<float>(static_cast<size_t>(p.q_heads), 0.25f);
      const Pair ds = p.sinks ? d.Data(ds0, pr.grad) : Pair{};
      // Both backwards read the reference's forward output, rounded to the output dtype, and its
      // lse (the backend's own would differ by the forward's error, measured above).
      const Pair o_in = d.Data(RoundedTo(d.Want(o), pr.out), pr.out);
      const Pair l_ref = d.FromWant(l, DType::kF32);
      const Pair dov = d.Data(RoundedTo(dout, dout_dtype), dout_dtype);
      backend_->AttentionBackward(s, qv.got, kv.got, vv.got, sv.got, qs.got, ks.got, o_in.got,
                                  l_ref.got, dov.got, dq.got, dk.got, dv.got, ds.got);
      ref_.AttentionBackward(s, qv.want, kv.want, vv.want, sv.want, qs.want, ks.want, o_in.want,
                             l_ref.want, dov.want, dq.want, dk.want, dv.want, ds.want);
      double bwd = std::max({d.Error(dq), d.Error(dk), d.Error(dv)});
      if (p.sinks) bwd = std::max(bwd, d.Error(ds));
      Expect("attention_bwd", bwd, tol().attention_backward, what + " dO " + DTypeName(dout_dtype));
    }
  }
}

// ---- optimizer (master state: F32 only) ---------------------------------------------------

TEST_P(OpsHarness, AdamWUpdateMatchesTheReference) {
  if (!Runs(OpKind::kAdamWUpdate)) return;
  // The state in the gradient dtype: F32 (fp32 master), or BF16 (torch_dtype bfloat16: p, g, m
  // and v in bf16, each widened, updated in fp32 and rounded once).
  const DType state = precision().grad;
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
        const auto g = RoundedTo(RandomVector(static_cast<size_t>(n), 11), state);
        auto p0 = RoundedTo(RandomVector(static_cast<size_t>(n), 12), state);
        auto m0 = RoundedTo(RandomVector(static_cast<size_t>(n), 13, 0.1f), state);
        auto v0 = RandomVector(static_cast<size_t>(n), 14, 0.1f);
        for (auto& x : v0) x = x * x;
        v0 = RoundedTo(v0, state);
        Sides d(*backend_, ref_);
        const Pair p = d.Data(p0, state), gv = d.Data(g, state), m = d.Data(m0, state);
        const Pair v = d.Data(v0, state);
        for (int step = 0; step < 3; ++step) {
          ref_.AdamWUpdate(s, p.want, gv.want, m.want, v.want);
          backend_->AdamWUpdate(s, p.got, gv.got, m.got, v.got);
        }
        // The reference computed in fp32 views: its results rounded as the state's are.
        const std::string what = std::to_string(n) + (decay ? " decay" : "") + " grad_scale " +
                                 std::to_string(grad_scale) + " " + DTypeName(state);
        if (tol().optimizer_exact && state == DType::kF32) {
          EXPECT_EQ(d.Got(p), d.Want(p)) << what;
          EXPECT_EQ(d.Got(m), d.Want(m)) << what;
          EXPECT_EQ(d.Got(v), d.Want(v)) << what;
        }
        Expect("adamw", d.Error(p), state == DType::kF32 ? tol().rowwise : tol().elementwise, what);
        DeviceArrays t(*backend_);
        if (state != DType::kF32) {
          // In bf16 state every backend gives the reference's own bf16 bits (the reference
          // running on bf16 views: widened, AdamWElement, rounded once per step).
          const View rp = t.Data(p0, state), rg = t.Data(g, state), rm = t.Data(m0, state);
          const View rv = t.Data(v0, state);
          DeviceArrays rt(ref_);
          const View wp = rt.Data(p0, state), wg = rt.Data(g, state), wm = rt.Data(m0, state);
          const View wv = rt.Data(v0, state);
          for (int step = 0; step < 3; ++step) {
            backend_->AdamWUpdate(s, rp, rg, rm, rv);
            ref_.AdamWUpdate(s, wp, wg, wm, wv);
          }
          EXPECT_EQ(t.Get(rp), rt.Get(wp)) << what;
          EXPECT_EQ(t.Get(rm), rt.Get(wm)) << what;
          EXPECT_EQ(t.Get(rv), rt.Get(wv)) << what;
          continue;
        }
        // With the compute copy written in the same pass: p, m and v as without it, and the
        // copy as Convert writes the updated p.
        for (DType copy_dtype : {DType::kBF16, DType::kF32}) {
          const View p2 = t.F32(p0), g2 = t.F32(g), m2 = t.F32(m0), v2 = t.F32(v0);
          const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
          const View copy = t.Data(zeros, copy_dtype), want = t.Data(zeros, copy_dtype);
          for (int step = 0; step < 3; ++step) backend_->AdamWUpdate(s, p2, g2, m2, v2, copy);
          EXPECT_EQ(t.Get(p2), d.Got(p)) << what;
          EXPECT_EQ(t.Get(m2), d.Got(m)) << what;
          EXPECT_EQ(t.Get(v2), d.Got(v)) << what;
          backend_->Convert(p2, want);
          EXPECT_EQ(t.Get(copy), t.Get(want)) << what << ", copy in " << DTypeName(copy_dtype);
        }
        if (grad_scale != 1.0f) {  // the bits of scaling the gradient in place first
          const View p1 = t.F32(p0), g1 = t.F32(g), m1 = t.F32(m0), v1 = t.F32(v0);
          AdamWScalars unscaled = s;
          unscaled.grad_scale = 1.0f;
          backend_->Scale(g1, grad_scale);
          for (int step = 0; step < 3; ++step) backend_->AdamWUpdate(unscaled, p1, g1, m1, v1);
          EXPECT_EQ(t.Get(p1), d.Got(p)) << what;
          EXPECT_EQ(t.Get(m1), d.Got(m)) << what;
          EXPECT_EQ(t.Get(v1), d.Got(v)) << what;
        }
      }
    }
  }
}

TEST_P(OpsHarness, SumOfSquaresAccumulatesAndScale) {
  if (!Runs(OpKind::kSumOfSquares) || !Runs(OpKind::kScale)) return;
  const DType state = precision().grad;  // the gradients' dtype (BF16: a bf16-state run)
  for (int64_t n : {1, 31, 250001}) {
    auto x = RoundedTo(RandomVector(static_cast<size_t>(n), 21, 3.0f), state);
    Sides d(*backend_, ref_);
    const Pair xv = d.Data(x, state);
    const Pair sum = d.F64(0.5), again = d.F64(0.5);  // accumulated into
    backend_->SumOfSquares(xv.got, sum.got);
    backend_->SumOfSquares(xv.got, again.got);
    ref_.SumOfSquares(xv.want, sum.want);
    Expect("reduction", std::fabs(d.GotScalar(sum) - d.WantScalar(sum)) / d.WantScalar(sum),
           tol().reduction_relative, std::to_string(n));
    EXPECT_EQ(d.GotScalar(sum), d.GotScalar(again)) << "not deterministic, n=" << n;
    // The same bits on other thread counts (the pieces' partial sums are added in order).
    for (int threads : {1, 3}) {
      BackendOptions options = std::get<0>(GetParam()).options;
      options.num_threads = threads;
      const auto other = std::move(CreateBackend(options)).value();
      DeviceArrays od(*other);
      const View ox = od.Data(x, state), osum = od.F64(0.5);
      other->SumOfSquares(ox, osum);
      EXPECT_EQ(od.Scalar(osum), d.GotScalar(sum)) << threads << " threads, n=" << n;
    }
    ref_.Scale(xv.want, 0.37f);
    backend_->Scale(xv.got, 0.37f);
    if (tol().optimizer_exact) {
      // One fp32 product, rounded once for BF16: the reference's bits either way.
      EXPECT_EQ(d.Got(xv), RoundedTo(d.Want(xv), state)) << n;
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

TEST(OpsHarnessCoverage, PrintsEveryBackendAndGemmPathItRunsAndTheOnesThisMachineCannot) {
  // The fast backend is registered once per bf16 GEMM path this CPU runs (registry.h); the
  // paths and backends it cannot run are printed here, never silently left out.
  int fast = 0;
  for (const RegisteredBackend& r : RegisteredBackends(3)) {
    std::printf("[harness] runs %s\n", r.name.c_str());
    fast += r.name.rfind("fast/", 0) == 0;
  }
  for (const UnavailableBackend& u : UnavailableBackends()) {
    std::printf("[harness] NOT RUN on this machine: %s: %s\n", u.name.c_str(), u.why.c_str());
  }
  int runnable_paths = 0;
  for (GemmBf16Path path : AllGemmBf16Paths()) runnable_paths += GemmBf16PathRuns(path, nullptr);
  EXPECT_EQ(fast, runnable_paths);
}

TEST(OpsHarnessCoverage, EveryOpHasAHarnessTest) {
  // The harness's tests above name every op; a new op in ops.h must get one (and this list).
  const std::set<OpKind> covered = {
      OpKind::kGemm, OpKind::kEmbeddingForward, OpKind::kEmbeddingBackward, OpKind::kRmsNormForward,
      OpKind::kRmsNormBackward, OpKind::kRopeTables, OpKind::kRopeForward, OpKind::kRopeBackward,
      OpKind::kAttentionForward, OpKind::kAttentionBackward, OpKind::kSwigluForward,
      OpKind::kSwigluBackward, OpKind::kAddInPlace, OpKind::kAddBias, OpKind::kBiasBackward,
      OpKind::kCrossEntropyForward, OpKind::kCrossEntropyBackward, OpKind::kAdamWUpdate,
      OpKind::kSumOfSquares, OpKind::kScale, OpKind::kConvert, OpKind::kDropout,
      // ops_harness_dropout_test.cc:
      OpKind::kDropoutMask, OpKind::kApplyDropoutMask, OpKind::kGemmDropped,
      OpKind::kGemmAddDropped, OpKind::kGemmConcatK, OpKind::kDroppedLinearBackward,
      // ops_harness_packed_test.cc:
      OpKind::kPackGemmB, OpKind::kGemmPackedB,
      // ops_harness_moe_test.cc:
      OpKind::kClampedSwigluForward, OpKind::kClampedSwigluBackward, OpKind::kRouterTopK,
      OpKind::kRouterTopKBackward, OpKind::kMoeDispatch, OpKind::kMoeGather,
      OpKind::kMoeGatherBackward, OpKind::kMoeCombine, OpKind::kMoeCombineBackward,
      // ops_harness_grouped_test.cc:
      OpKind::kGroupedGemm, OpKind::kGroupedGemmWeightGrad, OpKind::kDequantizeMxfp4};
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

TEST(BackendSupport, AnUnsupportedCombinationIsAnErrorNamingTheOp) {
  const auto backend = testing::MakeBackend("fast", 1);
  EXPECT_TRUE(CheckOpsSupport(*backend, kAllOps, DType::kF32, "fp32 training").ok());
  EXPECT_TRUE(CheckOpsSupport(*backend, kAllOps, DType::kBF16, "bf16 state").ok());
  const OpKind master[] = {OpKind::kAdamWUpdate};
  const Status s = CheckOpsSupport(*backend, master, DType::kF16, "fp16 optimizer");
  EXPECT_EQ(s.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(s.message().find("no F16 AdamWUpdate op"), std::string::npos) << s.message();
  const OpKind gemm[] = {OpKind::kGemm};
  EXPECT_FALSE(CheckOpsSupport(*backend, gemm, DType::kF16, "fp16 training").ok());
}

}  // namespace
}  // namespace air::engine
