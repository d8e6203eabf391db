// Finite-difference checks of every backward op of ReferenceOps (and of LinearBackward): for a
// fixed random projection r, L(inputs) = sum(r * op(inputs)) is differentiated numerically
// (central differences, the loss summed in double) and compared with the op's backward fed
// dy = r. The fast path is checked against the reference by ops_harness_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "engine/data/batch.h"
#include "engine/model/decoder_layer.h"
#include "engine/ops/cpu/reference_ops.h"
#include "test_util.h"

namespace air::engine {
namespace {

using testing::RandomVector;

constexpr float kEps = 4e-3f;
constexpr double kTolerance = 2e-3;  // ||numeric - analytic|| / ||analytic||

double Project(const std::vector<float>& y, const std::vector<float>& r) {
  double s = 0.0;
  for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

// Numeric gradient of loss() w.r.t. every element of `x` (perturbed in place and restored).
std::vector<double> NumericGrad(std::vector<float>& x, const std::function<double()>& loss) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + kEps;
    const double up = loss();
    x[i] = saved - kEps;
    const double down = loss();
    x[i] = saved;
    g[i] = (up - down) / (2.0 * static_cast<double>(kEps));
  }
  return g;
}

double RelativeError(const std::vector<double>& numeric, const std::vector<float>& analytic) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < numeric.size(); ++i) {
    diff += (numeric[i] - analytic[i]) * (numeric[i] - analytic[i]);
    norm += static_cast<double>(analytic[i]) * analytic[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-12);
}

class GradCheck : public ::testing::Test {
 protected:
  ReferenceOps ops_;
};

TEST_F(GradCheck, RmsNorm) {
  const int64_t rows = 3, dim = 8;
  auto x = RandomVector(rows * dim, 1), w = RandomVector(dim, 2), r = RandomVector(rows * dim, 3);
  std::vector<float> y(rows * dim), rstd(rows);
  auto loss = [&] {
    ops_.RmsNormForward(x.data(), w.data(), rows, dim, 1e-5f, y.data(), rstd.data());
    return Project(y, r);
  };
  loss();
  std::vector<float> dx(rows * dim), dw(dim);
  ops_.RmsNormBackward(x.data(), w.data(), rstd.data(), r.data(), rows, dim, dx.data(), dw.data());
  EXPECT_LT(RelativeError(NumericGrad(x, loss), dx), kTolerance);
  EXPECT_LT(RelativeError(NumericGrad(w, loss), dw), kTolerance);
}

TEST_F(GradCheck, Rope) {
  const int64_t n = 3, heads = 2, dim = 8;
  auto x = RandomVector(n * heads * dim, 4), r = RandomVector(n * heads * dim, 5);
  auto angles = RandomVector(n * dim / 2, 6, 2.0f);
  std::vector<float> cos(angles.size()), sin(angles.size());
  for (size_t i = 0; i < angles.size(); ++i) {
    cos[i] = std::cos(angles[i]);
    sin[i] = std::sin(angles[i]);
  }
  auto loss = [&] {
    std::vector<float> y = x;
    ops_.RopeForward(y.data(), n, heads, dim, cos.data(), sin.data());
    return Project(y, r);
  };
  std::vector<float> dx = r;
  ops_.RopeBackward(dx.data(), n, heads, dim, cos.data(), sin.data());
  EXPECT_LT(RelativeError(NumericGrad(x, loss), dx), kTolerance);
}

struct AttentionGradCase {
  int64_t q_heads, kv_heads, window;
  bool segments;
};

class AttentionGradCheck : public GradCheck,
                           public ::testing::WithParamInterface<AttentionGradCase> {};

TEST_P(AttentionGradCheck, QueryKeyValue) {
  const auto p = GetParam();
  AttentionShape s;
  s.batch = 2;
  s.q_len = s.kv_len = 6;
  s.q_heads = p.q_heads;
  s.kv_heads = p.kv_heads;
  s.head_dim = 4;
  s.sliding_window = p.window;
  s.scale = 0.5f;
  const size_t qn = static_cast<size_t>(s.batch * s.q_len * s.q_heads * s.head_dim);
  const size_t kvn = static_cast<size_t>(s.batch * s.kv_len * s.kv_heads * s.head_dim);
  auto q = RandomVector(qn, 7), k = RandomVector(kvn, 8), v = RandomVector(kvn, 9);
  auto r = RandomVector(qn, 10);
  std::vector<int32_t> seg = {1, 1, 2, 2, 2, 3, 1, 1, 1, 1, 0, 0};
  const int32_t* segs = p.segments ? seg.data() : nullptr;
  std::vector<float> out(qn), lse(static_cast<size_t>(s.batch * s.q_heads * s.q_len));
  auto loss = [&] {
    ops_.AttentionForward(s, q.data(), k.data(), v.data(), segs, segs, out.data(), lse.data());
    return Project(out, r);
  };
  loss();
  std::vector<float> dq(qn), dk(kvn), dv(kvn);
  ops_.AttentionBackward(s, q.data(), k.data(), v.data(), segs, segs, out.data(), lse.data(),
                         r.data(), dq.data(), dk.data(), dv.data());
  EXPECT_LT(RelativeError(NumericGrad(q, loss), dq), kTolerance);
  EXPECT_LT(RelativeError(NumericGrad(k, loss), dk), kTolerance);
  EXPECT_LT(RelativeError(NumericGrad(v, loss), dv), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Masks, AttentionGradCheck,
                         ::testing::Values(AttentionGradCase{2, 2, 0, false},
                                           AttentionGradCase{4, 2, 0, false},
                                           AttentionGradCase{2, 1, 3, false},
                                           AttentionGradCase{2, 1, 0, true}));

TEST_F(GradCheck, Swiglu) {
  const int64_t n = 16;
  auto g = RandomVector(n, 11, 2.0f), u = RandomVector(n, 12), r = RandomVector(n, 13);
  std::vector<float> out(n);
  auto loss = [&] {
    ops_.SwigluForward(g.data(), u.data(), n, out.data());
    return Project(out, r);
  };
  std::vector<float> dg(n), du(n);
  ops_.SwigluBackward(g.data(), u.data(), r.data(), n, dg.data(), du.data());
  EXPECT_LT(RelativeError(NumericGrad(g, loss), dg), kTolerance);
  EXPECT_LT(RelativeError(NumericGrad(u, loss), du), kTolerance);
}

TEST_F(GradCheck, CrossEntropyWithIgnoredRows) {
  const int64_t n = 4, vocab = 7;
  auto logits = RandomVector(n * vocab, 14, 2.0f);
  const std::vector<int32_t> targets = {3, kIgnoreIndex, 0, 6};
  std::vector<float> lse(n);
  const float scale = 0.7f;
  auto loss = [&] {
    double sum = 0.0;
    ops_.CrossEntropyForward(logits.data(), targets.data(), n, vocab, lse.data(), &sum);
    return scale * sum;
  };
  loss();
  std::vector<float> d(n * vocab);
  ops_.CrossEntropyBackward(logits.data(), targets.data(), lse.data(), n, vocab, scale, d.data());
  EXPECT_LT(RelativeError(NumericGrad(logits, loss), d), kTolerance);
}

TEST_F(GradCheck, EmbeddingSkipsThePaddingRow) {
  const int64_t vocab = 5, dim = 3, n = 6;
  auto table = RandomVector(vocab * dim, 15);
  const std::vector<int32_t> ids = {1, 4, 1, 0, 2, 4};
  auto r = RandomVector(n * dim, 16);
  std::vector<float> out(n * dim);
  auto loss = [&] {
    ops_.EmbeddingForward(ids.data(), n, table.data(), dim, out.data());
    return Project(out, r);
  };
  std::vector<float> dtable(vocab * dim);
  ops_.EmbeddingBackward(ids.data(), n, r.data(), dim, /*skip_id=*/-1, dtable.data());
  EXPECT_LT(RelativeError(NumericGrad(table, loss), dtable), kTolerance);
  std::vector<float> skipped(vocab * dim);
  ops_.EmbeddingBackward(ids.data(), n, r.data(), dim, /*skip_id=*/4, skipped.data());
  for (int64_t c = 0; c < dim; ++c) EXPECT_EQ(skipped[4 * dim + c], 0.0f);
  EXPECT_EQ(skipped[1 * dim], dtable[1 * dim]);
}

TEST_F(GradCheck, LinearWithBias) {
  const int64_t rows = 3, in = 5, out = 4;
  // The weights live in a buffer of the reference backend (host memory); the test reads and
  // pokes them through Host().
  View wv_all, wg_all, bv_all, bg_all;
  auto wv_buf = ops_.AllocateView(DType::kF32, {out, in}, &wv_all);
  auto wg_buf = ops_.AllocateView(DType::kF32, {out, in}, &wg_all);
  auto bv_buf = ops_.AllocateView(DType::kF32, {out}, &bv_all);
  auto bg_buf = ops_.AllocateView(DType::kF32, {out}, &bg_all);
  ASSERT_TRUE(wv_buf.ok() && wg_buf.ok() && bv_buf.ok() && bg_buf.ok());
  const auto w_init = RandomVector(out * in, 17), b_init = RandomVector(out, 18);
  ops_.CopyToDevice(wv_all, w_init.data());
  ops_.CopyToDevice(bv_all, b_init.data());
  ops_.Zero(wg_all);
  ops_.Zero(bg_all);
  Parameter w{"w", {out, in}};
  w.value = wv_all;
  w.grad = wg_all;
  Parameter b{"b", {out}};
  b.value = bv_all;
  b.grad = bg_all;
  auto x = RandomVector(rows * in, 19), r = RandomVector(rows * out, 20);
  std::vector<float> y(rows * out);
  auto loss = [&] {
    LinearForward(ops_, x.data(), rows, w, &b, y.data());
    return Project(y, r);
  };
  std::vector<float> dx(rows * in);
  LinearBackward(ops_, x.data(), rows, w, &b, r.data(), dx.data(), false);
  EXPECT_LT(RelativeError(NumericGrad(x, loss), dx), kTolerance);
  auto as_vector = [](const View& v) {
    auto span = testing::Host(v);
    return std::vector<float>(span.begin(), span.end());
  };
  std::vector<float> wv = as_vector(w.value);
  auto wloss = [&] {
    std::copy(wv.begin(), wv.end(), testing::Host(w.value).begin());
    return loss();
  };
  EXPECT_LT(RelativeError(NumericGrad(wv, wloss), as_vector(w.grad)), kTolerance);
  std::vector<float> bv = as_vector(b.value);
  auto bloss = [&] {
    std::copy(bv.begin(), bv.end(), testing::Host(b.value).begin());
    return loss();
  };
  EXPECT_LT(RelativeError(NumericGrad(bv, bloss), as_vector(b.grad)), kTolerance);
  // A frozen weight gets no weight-gradient GEMM (its gradient view may be empty) and the same
  // input gradient (the finite differences above left a perturbed weight behind: restore it).
  std::copy(wv.begin(), wv.end(), testing::Host(w.value).begin());
  std::copy(bv.begin(), bv.end(), testing::Host(b.value).begin());
  w.trainable = false;
  w.grad = View();
  std::vector<float> dx_frozen(rows * in);
  LinearBackward(ops_, x.data(), rows, w, &b, r.data(), dx_frozen.data(), false);
  EXPECT_EQ(dx_frozen, dx);
}

}  // namespace
}  // namespace air::engine
