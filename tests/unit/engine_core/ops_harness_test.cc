// The per-op harness (ggml's test-backend-ops): every op of FastOps is run against
// ReferenceOps on the same random inputs over a set of shapes, including ragged sizes that hit
// the edge paths of the blocked kernels, and must agree within float tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "engine/data/batch.h"
#include "engine/ops/cpu/fast_ops.h"
#include "engine/ops/cpu/reference_ops.h"
#include "test_util.h"

namespace air::engine {
namespace {

using testing::RandomVector;

// max |a - b| / (1 + max |b|): relative to the scale of the result.
float ScaledMaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float diff = 0.0f, scale = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return diff / (1.0f + scale);
}

class OpsHarness : public ::testing::Test {
 protected:
  ReferenceOps ref_;
  FastOps fast_{3};  // three threads even on two cores: exercises uneven chunking
};

TEST_F(OpsHarness, GemmAllTransposesAndRaggedShapes) {
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
          auto a = RandomVector(static_cast<size_t>(m * k), 1);
          auto b = RandomVector(static_cast<size_t>(k * n), 2);
          auto c_ref = RandomVector(static_cast<size_t>(m * n), 3);
          auto c_fast = c_ref;
          ref_.Gemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, beta, c_ref.data(), n);
          fast_.Gemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, beta, c_fast.data(), n);
          EXPECT_LT(ScaledMaxDiff(c_fast, c_ref), 2e-6f * std::sqrt(static_cast<float>(k)))
              << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb
              << " beta=" << beta;
        }
      }
    }
  }
}

TEST_F(OpsHarness, GemmBetaZeroIgnoresNaNInOutputAndStridedOperands) {
  const int64_t m = 20, n = 40, k = 24, ld_pad = 7;
  auto a = RandomVector(static_cast<size_t>(m * (k + ld_pad)), 4);
  auto b = RandomVector(static_cast<size_t>(n * (k + ld_pad)), 5);
  std::vector<float> c_ref(static_cast<size_t>(m * (n + ld_pad)), NAN);
  auto c_fast = c_ref;
  ref_.Gemm(false, true, m, n, k, a.data(), k + ld_pad, b.data(), k + ld_pad, 0.0f, c_ref.data(),
            n + ld_pad);
  fast_.Gemm(false, true, m, n, k, a.data(), k + ld_pad, b.data(), k + ld_pad, 0.0f, c_fast.data(),
             n + ld_pad);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n + ld_pad; ++j) {
      const float r = c_ref[i * (n + ld_pad) + j], f = c_fast[i * (n + ld_pad) + j];
      if (j < n) {
        ASSERT_FALSE(std::isnan(f));
        EXPECT_NEAR(f, r, 1e-4f);
      } else {
        EXPECT_TRUE(std::isnan(f)) << "wrote outside the matrix at column " << j;
      }
    }
  }
}

TEST_F(OpsHarness, GemmWithZeroDepthScalesC) {
  std::vector<float> c = {1, 2, 3, 4};
  fast_.Gemm(false, false, 2, 2, 0, nullptr, 0, nullptr, 2, 1.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{1, 2, 3, 4}));
  fast_.Gemm(false, false, 2, 2, 0, nullptr, 0, nullptr, 2, 0.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
}

TEST_F(OpsHarness, RmsNormForwardBackward) {
  for (auto [rows, dim] : std::vector<std::pair<int64_t, int64_t>>{{1, 8}, {37, 64}, {300, 130}}) {
    auto x = RandomVector(static_cast<size_t>(rows * dim), 6);
    auto w = RandomVector(static_cast<size_t>(dim), 7);
    auto dy = RandomVector(static_cast<size_t>(rows * dim), 8);
    std::vector<float> y_ref(x.size()), y_fast(x.size()), r_ref(rows), r_fast(rows);
    ref_.RmsNormForward(x.data(), w.data(), rows, dim, 1e-5f, y_ref.data(), r_ref.data());
    fast_.RmsNormForward(x.data(), w.data(), rows, dim, 1e-5f, y_fast.data(), r_fast.data());
    EXPECT_LT(ScaledMaxDiff(y_fast, y_ref), 1e-6f);
    EXPECT_LT(ScaledMaxDiff(r_fast, r_ref), 1e-6f);
    std::vector<float> dx_ref(x.size(), 0.5f), dx_fast(x.size(), 0.5f), dw_ref(dim, 0.25f),
        dw_fast(dim, 0.25f);
    ref_.RmsNormBackward(x.data(), w.data(), r_ref.data(), dy.data(), rows, dim, dx_ref.data(),
                         dw_ref.data());
    fast_.RmsNormBackward(x.data(), w.data(), r_ref.data(), dy.data(), rows, dim, dx_fast.data(),
                          dw_fast.data());
    EXPECT_LT(ScaledMaxDiff(dx_fast, dx_ref), 1e-5f);
    EXPECT_LT(ScaledMaxDiff(dw_fast, dw_ref), 1e-5f);
  }
}

TEST_F(OpsHarness, SwigluForwardBackward) {
  const int64_t n = 40000;  // large enough to be split over threads
  auto g = RandomVector(n, 9, 3.0f), u = RandomVector(n, 10), d = RandomVector(n, 11);
  std::vector<float> o_ref(n), o_fast(n);
  ref_.SwigluForward(g.data(), u.data(), n, o_ref.data());
  fast_.SwigluForward(g.data(), u.data(), n, o_fast.data());
  EXPECT_LT(ScaledMaxDiff(o_fast, o_ref), 1e-6f);
  std::vector<float> dg_ref(n, 1.0f), dg_fast(n, 1.0f), du_ref(n), du_fast(n);
  ref_.SwigluBackward(g.data(), u.data(), d.data(), n, dg_ref.data(), du_ref.data());
  fast_.SwigluBackward(g.data(), u.data(), d.data(), n, dg_fast.data(), du_fast.data());
  EXPECT_LT(ScaledMaxDiff(dg_fast, dg_ref), 1e-6f);
  EXPECT_LT(ScaledMaxDiff(du_fast, du_ref), 1e-6f);
}

TEST_F(OpsHarness, AdamWUpdateGivesTheReferenceBits) {
  // Sizes: below one thread's chunk, ragged over several chunks and vectors.
  for (int64_t n : {1, 17, 100003}) {
    for (bool decay : {false, true}) {
      AdamWScalars s;
      s.step_size = 1e-3f / 0.19f;
      s.bias_correction2_sqrt = 0.0446f;
      s.decay = decay;
      s.decay_factor = 1.0f - 1e-3f * 0.1f;
      const auto g = RandomVector(static_cast<size_t>(n), 11);
      auto p_ref = RandomVector(static_cast<size_t>(n), 12);
      auto m_ref = RandomVector(static_cast<size_t>(n), 13, 0.1f);
      auto v_ref = RandomVector(static_cast<size_t>(n), 14, 0.1f);
      for (auto& x : v_ref) x = x * x;
      auto p_fast = p_ref, m_fast = m_ref, v_fast = v_ref;
      for (int step = 0; step < 3; ++step) {
        ref_.AdamWUpdate(s, n, p_ref.data(), g.data(), m_ref.data(), v_ref.data());
        fast_.AdamWUpdate(s, n, p_fast.data(), g.data(), m_fast.data(), v_fast.data());
      }
      EXPECT_EQ(p_fast, p_ref) << n << " decay=" << decay;
      EXPECT_EQ(m_fast, m_ref) << n;
      EXPECT_EQ(v_fast, v_ref) << n;
    }
  }
}

TEST_F(OpsHarness, SumOfSquaresAndScale) {
  for (int64_t n : {1, 31, 250001}) {
    auto x = RandomVector(static_cast<size_t>(n), 21, 3.0f);
    const double want = ref_.SumOfSquares(x.data(), n);
    EXPECT_NEAR(fast_.SumOfSquares(x.data(), n), want, 1e-12 * want) << n;
    EXPECT_EQ(fast_.SumOfSquares(x.data(), n), fast_.SumOfSquares(x.data(), n));
    auto y = x;
    ref_.Scale(x.data(), n, 0.37f);
    fast_.Scale(y.data(), n, 0.37f);
    EXPECT_EQ(x, y) << n;
  }
}

TEST_F(OpsHarness, CrossEntropyForwardBackwardWithIgnoredRows) {
  const int64_t n = 50, vocab = 1001;
  auto logits = RandomVector(static_cast<size_t>(n * vocab), 12, 4.0f);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = i % 7 == 0 ? kIgnoreIndex : (i * 37) % vocab;
  std::vector<float> lse_ref(n), lse_fast(n);
  const double loss_ref =
      ref_.CrossEntropyForward(logits.data(), targets.data(), n, vocab, lse_ref.data());
  const double loss_fast =
      fast_.CrossEntropyForward(logits.data(), targets.data(), n, vocab, lse_fast.data());
  EXPECT_NEAR(loss_fast, loss_ref, 1e-5 * std::fabs(loss_ref));
  EXPECT_LT(ScaledMaxDiff(lse_fast, lse_ref), 1e-6f);
  std::vector<float> d_ref(logits.size()), d_fast = logits;  // fast runs in place
  ref_.CrossEntropyBackward(logits.data(), targets.data(), lse_ref.data(), n, vocab, 0.1f,
                            d_ref.data());
  fast_.CrossEntropyBackward(d_fast.data(), targets.data(), lse_ref.data(), n, vocab, 0.1f,
                             d_fast.data());
  EXPECT_LT(ScaledMaxDiff(d_fast, d_ref), 1e-7f);
  for (int64_t c = 0; c < vocab; ++c) ASSERT_EQ(d_fast[c], 0.0f) << "ignored row 0 has grads";
}

struct AttentionCase {
  int64_t batch, q_len, kv_len, q_heads, kv_heads, head_dim, q_offset, window;
  bool segments;
};

class AttentionHarness : public OpsHarness, public ::testing::WithParamInterface<AttentionCase> {};

TEST_P(AttentionHarness, ForwardAndBackwardMatchReference) {
  const AttentionCase p = GetParam();
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
  auto q = RandomVector(q_size, 13), k = RandomVector(kv_size, 14), v = RandomVector(kv_size, 15);
  auto dout = RandomVector(q_size, 16);
  std::vector<int32_t> q_seg, kv_seg;
  if (p.segments) {
    // Two documents per row; the second starts a third of the way in.
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t j = 0; j < p.kv_len; ++j) kv_seg.push_back(j < p.kv_len / 3 ? 1 : 2);
      for (int64_t i = 0; i < p.q_len; ++i) {
        q_seg.push_back(p.q_offset + i < p.kv_len / 3 ? 1 : 2);
      }
    }
  }
  const int32_t* qs = p.segments ? q_seg.data() : nullptr;
  const int32_t* ks = p.segments ? kv_seg.data() : nullptr;
  const size_t lse_size = static_cast<size_t>(p.batch * p.q_heads * p.q_len);
  std::vector<float> o_ref(q_size), o_fast(q_size), l_ref(lse_size), l_fast(lse_size);
  ref_.AttentionForward(s, q.data(), k.data(), v.data(), qs, ks, o_ref.data(), l_ref.data());
  fast_.AttentionForward(s, q.data(), k.data(), v.data(), qs, ks, o_fast.data(), l_fast.data());
  EXPECT_LT(ScaledMaxDiff(o_fast, o_ref), 2e-6f);
  EXPECT_LT(ScaledMaxDiff(l_fast, l_ref), 2e-6f);
  std::vector<float> dq_ref(q_size, 0.1f), dq_fast(q_size, 0.1f);
  std::vector<float> dk_ref(kv_size), dk_fast(kv_size), dv_ref(kv_size), dv_fast(kv_size);
  ref_.AttentionBackward(s, q.data(), k.data(), v.data(), qs, ks, o_ref.data(), l_ref.data(),
                         dout.data(), dq_ref.data(), dk_ref.data(), dv_ref.data());
  fast_.AttentionBackward(s, q.data(), k.data(), v.data(), qs, ks, o_ref.data(), l_ref.data(),
                          dout.data(), dq_fast.data(), dk_fast.data(), dv_fast.data());
  EXPECT_LT(ScaledMaxDiff(dq_fast, dq_ref), 1e-5f);
  EXPECT_LT(ScaledMaxDiff(dk_fast, dk_ref), 1e-5f);
  EXPECT_LT(ScaledMaxDiff(dv_fast, dv_ref), 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionHarness,
    ::testing::Values(AttentionCase{1, 1, 1, 1, 1, 2, 0, 0, false},
                      AttentionCase{2, 17, 17, 4, 2, 16, 0, 0, false},    // GQA
                      AttentionCase{1, 150, 150, 2, 1, 32, 0, 0, false},  // several q blocks
                      AttentionCase{2, 70, 70, 4, 4, 8, 0, 5, false},     // sliding window
                      AttentionCase{2, 40, 40, 6, 2, 16, 0, 0, true},     // packed segments
                      AttentionCase{2, 3, 20, 4, 2, 16, 17, 0, false},    // KV-cache step
                      AttentionCase{1, 1, 90, 2, 1, 8, 89, 7, false}));   // decode + window

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

TEST(CpuOpsFactory, KnowsItsKinds) {
  EXPECT_EQ(CreateCpuOps({"reference", 0})->name(), "reference");
  EXPECT_EQ(CreateCpuOps({"fast", 2})->name(), "fast");
  EXPECT_EQ(CreateCpuOps({"cuda", 0}), nullptr);
  EXPECT_FALSE(IsKnownOpsKind("cuda"));
}

}  // namespace
}  // namespace air::engine
