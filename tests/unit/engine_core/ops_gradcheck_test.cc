// Finite-difference checks of every backward op (and of LinearBackward) on every registered
// backend: for a fixed random projection r, L(inputs) = sum(r * op(inputs)) is differentiated
// numerically (central differences of the backend's own forward, the loss summed in double) and
// compared with the backend's backward fed dy = r. In F32: finite differences need the
// precision (the bf16 paths are held to the fp32 reference by ops_harness_test.cc).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <memory>

#include "engine/backend/registry.h"
#include "engine/data/batch.h"
#include "engine/model/decoder_layer.h"
#include "op_test_util.h"
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

class GradCheck : public ::testing::TestWithParam<RegisteredBackend> {
 protected:
  void SetUp() override { backend_ = std::move(CreateBackend(GetParam().options)).value(); }
  // A fresh F32 view of `host` in the backend's memory (kept alive with the test).
  View Up(const std::vector<float>& host, Shape shape = {}) { return arrays().F32(host, shape); }
  std::vector<float> Down(const View& v) { return arrays().Get(v); }
  testing::DeviceArrays& arrays() {
    if (!arrays_) arrays_ = std::make_unique<testing::DeviceArrays>(*backend_);
    return *arrays_;
  }
  std::shared_ptr<Backend> backend_;
  std::unique_ptr<testing::DeviceArrays> arrays_;
};

std::string BackendName(const ::testing::TestParamInfo<RegisteredBackend>& info) {
  std::string name = info.param.name;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

TEST_P(GradCheck, RmsNorm) {
  const int64_t rows = 3, dim = 8;
  auto x = RandomVector(rows * dim, 1), w = RandomVector(dim, 2), r = RandomVector(rows * dim, 3);
  const View y = Up(std::vector<float>(rows * dim), {rows, dim}),
             rstd = Up(std::vector<float>(rows));
  auto loss = [&] {
    backend_->RmsNormForward(Up(x, {rows, dim}), Up(w), 1e-5f, y, rstd);
    return Project(Down(y), r);
  };
  loss();
  const View dx = Up(std::vector<float>(rows * dim)), dw = Up(std::vector<float>(dim));
  backend_->RmsNormBackward(Up(x, {rows, dim}), Up(w), rstd, Up(r), dx, dw);
  EXPECT_LT(RelativeError(NumericGrad(x, loss), Down(dx)), kTolerance);
  EXPECT_LT(RelativeError(NumericGrad(w, loss), Down(dw)), kTolerance);
}

TEST_P(GradCheck, Rope) {
  const int64_t n = 3, heads = 2, dim = 8;
  auto x = RandomVector(n * heads * dim, 4), r = RandomVector(n * heads * dim, 5);
  auto angles = RandomVector(n * dim / 2, 6, 2.0f);
  std::vector<float> cos(angles.size()), sin(angles.size());
  for (size_t i = 0; i < angles.size(); ++i) {
    cos[i] = std::cos(angles[i]);
    sin[i] = std::sin(angles[i]);
  }
  const View cv = Up(cos, {n, dim / 2}), sv = Up(sin, {n, dim / 2});
  auto loss = [&] {
    const View y = Up(x);
    backend_->RopeForward(y, cv, sv);
    return Project(Down(y), r);
  };
  const View dx = Up(r);
  backend_->RopeBackward(dx, cv, sv);
  EXPECT_LT(RelativeError(NumericGrad(x, loss), Down(dx)), kTolerance);
}

struct AttentionGradCase {
  int64_t q_heads, kv_heads, window;
  bool segments;
  bool sinks = false;
};

TEST_P(GradCheck, Attention) {
  for (const AttentionGradCase& p :
       {AttentionGradCase{2, 2, 0, false}, AttentionGradCase{4, 2, 0, false},
        AttentionGradCase{2, 1, 3, false}, AttentionGradCase{2, 1, 0, true},
        AttentionGradCase{4, 2, 3, false, true}, AttentionGradCase{2, 1, 0, true, true}}) {
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
    auto sinks = RandomVector(static_cast<size_t>(s.q_heads), 25);
    const std::vector<int32_t> seg = {1, 1, 2, 2, 2, 3, 1, 1, 1, 1, 0, 0};
    const View segs = p.segments ? arrays().I32(seg) : View();
    const View out = Up(std::vector<float>(qn));
    const View lse = Up(std::vector<float>(static_cast<size_t>(s.batch * s.q_heads * s.q_len)));
    auto loss = [&] {
      const View sv = p.sinks ? Up(sinks) : View();
      backend_->AttentionForward(s, Up(q), Up(k), Up(v), sv, segs, segs, out, lse);
      return Project(Down(out), r);
    };
    loss();
    const View dq = Up(std::vector<float>(qn)), dk = Up(std::vector<float>(kvn));
    const View dv = Up(std::vector<float>(kvn));
    const View ds = p.sinks ? Up(std::vector<float>(sinks.size())) : View();
    backend_->AttentionBackward(s, Up(q), Up(k), Up(v), p.sinks ? Up(sinks) : View(), segs, segs,
                                out, lse, Up(r), dq, dk, dv, ds);
    const std::string what = "heads " + std::to_string(p.q_heads) + "/" +
                             std::to_string(p.kv_heads) + " window " + std::to_string(p.window) +
                             (p.sinks ? " sinks" : "");
    if (p.sinks) {
      EXPECT_LT(RelativeError(NumericGrad(sinks, loss), Down(ds)), kTolerance) << what;
    }
    EXPECT_LT(RelativeError(NumericGrad(q, loss), Down(dq)), kTolerance) << what;
    EXPECT_LT(RelativeError(NumericGrad(k, loss), Down(dk)), kTolerance) << what;
    EXPECT_LT(RelativeError(NumericGrad(v, loss), Down(dv)), kTolerance) << what;
  }
}

TEST_P(GradCheck, Swiglu) {
  const int64_t n = 16;
  auto g = RandomVector(n, 11, 2.0f), u = RandomVector(n, 12), r = RandomVector(n, 13);
  const View out = Up(std::vector<float>(n));
  auto loss = [&] {
    backend_->SwigluForward(Up(g), Up(u), out);
    return Project(Down(out), r);
  };
  const View dg = Up(std::vector<float>(n)), du = Up(std::vector<float>(n));
  backend_->SwigluBackward(Up(g), Up(u), Up(r), dg, du);
  EXPECT_LT(RelativeError(NumericGrad(g, loss), Down(dg)), kTolerance);
  EXPECT_LT(RelativeError(NumericGrad(u, loss), Down(du)), kTolerance);
}

TEST_P(GradCheck, ClampedSwiglu) {
  const int64_t n = 24;
  const float alpha = 1.702f, limit = 1.0f;
  // Inputs on both sides of the limits, none within the finite-difference step of them.
  auto gate_up = RandomVector(2 * n, 26, 2.0f), r = RandomVector(n, 27);
  for (float& x : gate_up) {
    if (std::fabs(std::fabs(x) - limit) < 0.05f) x += 0.1f;
  }
  const View out = Up(std::vector<float>(n), {n});
  auto loss = [&] {
    backend_->ClampedSwigluForward(Up(gate_up, {n / 4, 8}), alpha, limit, out.Reshaped({n / 4, 4}));
    return Project(Down(out), r);
  };
  const View dg = Up(std::vector<float>(2 * n));
  backend_->ClampedSwigluBackward(Up(gate_up, {n / 4, 8}), alpha, limit, Up(r, {n / 4, 4}),
                                  dg.Reshaped({n / 4, 8}));
  EXPECT_LT(RelativeError(NumericGrad(gate_up, loss), Down(dg)), kTolerance);
}

TEST_P(GradCheck, RouterTopKSoftmax) {
  const int64_t n = 5, experts = 6, k = 3;
  // Logits 0.3 apart in a shuffled order per token: the top-k choice is stable under the step.
  std::vector<float> logits(n * experts);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t e = 0; e < experts; ++e) {
      logits[t * experts + e] = 0.3f * static_cast<float>((e * 5 + t * 3) % experts) - 0.7f;
    }
  }
  auto r = RandomVector(n * k, 28);
  const View idx = arrays().I32(std::vector<int32_t>(n * k), {n, k});
  const View w = Up(std::vector<float>(n * k), {n, k});
  auto loss = [&] {
    backend_->RouterTopK(Up(logits, {n, experts}), idx, w);
    return Project(Down(w), r);
  };
  loss();
  const View dl = Up(std::vector<float>(n * experts), {n, experts});
  backend_->RouterTopKBackward(idx, w, Up(r, {n, k}), dl);
  EXPECT_LT(RelativeError(NumericGrad(logits, loss), Down(dl)), kTolerance);
}

TEST_P(GradCheck, MoeGatherAndCombine) {
  const int64_t n = 4, k = 2, dim = 3;
  const View indices = arrays().I32({2, 0, 1, 2, 0, 1, 2, 1}, {n, k});
  const View offsets = arrays().I32(std::vector<int32_t>(4));
  const View token_of_row = arrays().I32(std::vector<int32_t>(n * k));
  const View row_of_slot = arrays().I32(std::vector<int32_t>(n * k), {n, k});
  backend_->MoeDispatch(indices, offsets, token_of_row, row_of_slot);
  auto x = RandomVector(n * dim, 29), rg = RandomVector(n * k * dim, 30);
  const View grouped = Up(std::vector<float>(n * k * dim), {n * k, dim});
  auto gather_loss = [&] {
    backend_->MoeGather(Up(x, {n, dim}), token_of_row, grouped);
    return Project(Down(grouped), rg);
  };
  const View dx = Up(std::vector<float>(n * dim), {n, dim});
  backend_->MoeGatherBackward(Up(rg, {n * k, dim}), row_of_slot, dx);
  EXPECT_LT(RelativeError(NumericGrad(x, gather_loss), Down(dx)), kTolerance);

  auto y = RandomVector(n * k * dim, 31), w = RandomVector(n * k, 32),
       r = RandomVector(n * dim, 33);
  const View out = Up(std::vector<float>(n * dim), {n, dim});
  auto combine_loss = [&] {
    backend_->MoeCombine(Up(y, {n * k, dim}), Up(w, {n, k}), row_of_slot, out);
    return Project(Down(out), r);
  };
  const View dy = Up(std::vector<float>(n * k * dim), {n * k, dim});
  const View dw = Up(std::vector<float>(n * k), {n, k});
  backend_->MoeCombineBackward(Up(y, {n * k, dim}), Up(w, {n, k}), row_of_slot, Up(r, {n, dim}), dy,
                               dw);
  EXPECT_LT(RelativeError(NumericGrad(y, combine_loss), Down(dy)), kTolerance);
  EXPECT_LT(RelativeError(NumericGrad(w, combine_loss), Down(dw)), kTolerance);
}

// The grouped GEMM's two backward ops against differences of its forward, in both weight
// layouts: dx = dy w_g^T is the forward with the other layout (GroupedGemm), dw_g and db_g are
// GroupedGemmWeightGrad; the offsets leave a row before the first group and an empty group.
TEST_P(GradCheck, GroupedGemmInBothLayouts) {
  const int64_t rows = 7, in = 4, out = 3, groups = 3;
  const View offsets = arrays().I32({1, 3, 3, 7});
  for (bool trans_w : {false, true}) {
    auto x = RandomVector(rows * in, 40), w = RandomVector(groups * in * out, 41);
    auto b = RandomVector(groups * out, 42), r = RandomVector(rows * out, 43);
    for (int64_t j = 0; j < out; ++j) r[j] = 0.0f;  // row 0 is in no group: y keeps its zeros
    const View y = Up(std::vector<float>(rows * out), {rows, out});
    auto loss = [&] {
      backend_->GroupedGemm(trans_w, out, in, Up(x, {rows, in}), Up(w), Up(b), offsets, 0.0f, y);
      return Project(Down(y), r);
    };
    // y = x w_g: dx = dy w_g^T, the forward with w (G, in, out) read as (G, N = in, K = out)
    // transposed; with trans_w (w stored (G, out, in)) the untransposed product.
    const View dx = Up(std::vector<float>(rows * in), {rows, in});
    backend_->GroupedGemm(!trans_w, in, out, Up(r, {rows, out}), Up(w), View(), offsets, 0.0f, dx);
    // dW: (G, in, out) += x^T dy; stored (G, out, in): += dy^T x.
    const View dw = Up(std::vector<float>(groups * in * out)),
               db = Up(std::vector<float>(groups * out));
    if (trans_w) {
      backend_->GroupedGemmWeightGrad(out, in, Up(r, {rows, out}), Up(x, {rows, in}), offsets, dw,
                                      View());
      backend_->GroupedGemmWeightGrad(in, out, View(), Up(r, {rows, out}), offsets, View(), db);
    } else {
      backend_->GroupedGemmWeightGrad(in, out, Up(x, {rows, in}), Up(r, {rows, out}), offsets, dw,
                                      db);
    }
    const std::string layout = trans_w ? "w (G, out, in)" : "w (G, in, out)";
    auto dx_num = NumericGrad(x, loss);
    // Row 0 is in no group: nothing flows to it (dx there is the forward's zero).
    EXPECT_LT(RelativeError(dx_num, Down(dx)), kTolerance) << layout;
    EXPECT_LT(RelativeError(NumericGrad(w, loss), Down(dw)), kTolerance) << layout;
    EXPECT_LT(RelativeError(NumericGrad(b, loss), Down(db)), kTolerance) << layout;
    const auto got_dw = Down(dw);
    for (int64_t i = 0; i < in * out; ++i) EXPECT_EQ(got_dw[in * out + i], 0.0f);  // empty group
  }
}

TEST_P(GradCheck, CrossEntropyWithIgnoredRows) {
  const int64_t n = 4, vocab = 7;
  auto logits = RandomVector(n * vocab, 14, 2.0f);
  const View targets = arrays().I32({3, kIgnoreIndex, 0, 6});
  const View lse = Up(std::vector<float>(n));
  const float scale = 0.7f;
  auto loss = [&] {
    const View sum = arrays().F64(0.0);
    backend_->CrossEntropyForward(Up(logits, {n, vocab}), targets, lse, sum);
    return scale * arrays().Scalar(sum);
  };
  loss();
  const View d = Up(std::vector<float>(n * vocab), {n, vocab});
  backend_->CrossEntropyBackward(Up(logits, {n, vocab}), targets, lse, scale, d);
  EXPECT_LT(RelativeError(NumericGrad(logits, loss), Down(d)), kTolerance);
}

TEST_P(GradCheck, EmbeddingSkipsThePaddingRow) {
  const int64_t vocab = 5, dim = 3, n = 6;
  auto table = RandomVector(vocab * dim, 15);
  const View ids = arrays().I32({1, 4, 1, 0, 2, 4});
  auto r = RandomVector(n * dim, 16);
  const View out = Up(std::vector<float>(n * dim), {n, dim});
  auto loss = [&] {
    backend_->EmbeddingForward(ids, Up(table, {vocab, dim}), out);
    return Project(Down(out), r);
  };
  const View dtable = Up(std::vector<float>(vocab * dim), {vocab, dim});
  backend_->EmbeddingBackward(ids, Up(r, {n, dim}), /*skip_id=*/-1, dtable);
  EXPECT_LT(RelativeError(NumericGrad(table, loss), Down(dtable)), kTolerance);
  const View skipped = Up(std::vector<float>(vocab * dim), {vocab, dim});
  backend_->EmbeddingBackward(ids, Up(r, {n, dim}), /*skip_id=*/4, skipped);
  const auto got = Down(skipped), all = Down(dtable);
  for (int64_t c = 0; c < dim; ++c) EXPECT_EQ(got[4 * dim + c], 0.0f);
  EXPECT_EQ(got[1 * dim], all[1 * dim]);
}

TEST_P(GradCheck, BiasAndAddInPlace) {
  const int64_t rows = 3, cols = 5;
  auto y0 = RandomVector(rows * cols, 21), b = RandomVector(cols, 22),
       x = RandomVector(rows * cols, 23);
  auto r = RandomVector(rows * cols, 24);
  auto loss = [&] {
    const View y = Up(y0, {rows, cols});
    backend_->AddBias(y, Up(b));
    backend_->AddInPlace(y, Up(x, {rows, cols}));
    return Project(Down(y), r);
  };
  const View db = Up(std::vector<float>(cols));
  backend_->BiasBackward(Up(r, {rows, cols}), db);
  EXPECT_LT(RelativeError(NumericGrad(b, loss), Down(db)), kTolerance);
  std::vector<float> dx(r.begin(), r.end());  // d(y + x)/dx = 1: the gradient is r itself
  EXPECT_LT(RelativeError(NumericGrad(x, loss), dx), kTolerance);
}

TEST_P(GradCheck, LinearWithBias) {
  const int64_t rows = 3, in = 5, out = 4;
  const auto w_init = RandomVector(out * in, 17), b_init = RandomVector(out, 18);
  Parameter w{"w", {out, in}};
  w.value = Up(w_init, {out, in});
  w.grad = Up(std::vector<float>(out * in), {out, in});
  Parameter b{"b", {out}};
  b.value = Up(b_init);
  b.grad = Up(std::vector<float>(out));
  const Linear linear{&w, &b};
  auto x = RandomVector(rows * in, 19), r = RandomVector(rows * out, 20);
  const View y = Up(std::vector<float>(rows * out), {rows, out});
  auto loss = [&] {
    LinearForward(*backend_, {}, Up(x, {rows, in}), linear, y);
    return Project(Down(y), r);
  };
  const View dx = Up(std::vector<float>(rows * in), {rows, in});
  LinearBackward(*backend_, {}, Up(x, {rows, in}), linear, Up(r, {rows, out}), dx, false);
  EXPECT_LT(RelativeError(NumericGrad(x, loss), Down(dx)), kTolerance);
  std::vector<float> wv = w_init;
  auto wloss = [&] {
    backend_->CopyToDevice(w.value, wv.data());
    return loss();
  };
  EXPECT_LT(RelativeError(NumericGrad(wv, wloss), Down(w.grad)), kTolerance);
  std::vector<float> bv = b_init;
  auto bloss = [&] {
    backend_->CopyToDevice(b.value, bv.data());
    return loss();
  };
  EXPECT_LT(RelativeError(NumericGrad(bv, bloss), Down(b.grad)), kTolerance);
  // A frozen weight gets no weight-gradient GEMM (its gradient view may be empty) and the same
  // input gradient (the finite differences above left a perturbed weight behind: restore it).
  backend_->CopyToDevice(w.value, w_init.data());
  backend_->CopyToDevice(b.value, b_init.data());
  w.trainable = false;
  w.grad = View();
  const View dx_frozen = Up(std::vector<float>(rows * in), {rows, in});
  LinearBackward(*backend_, {}, Up(x, {rows, in}), linear, Up(r, {rows, out}), dx_frozen, false);
  EXPECT_EQ(Down(dx_frozen), Down(dx));
}

INSTANTIATE_TEST_SUITE_P(Backends, GradCheck, ::testing::ValuesIn(RegisteredBackends(2)),
                         BackendName);

}  // namespace
}  // namespace air::engine
