// The per-op harness (ops_harness_test.cc) for GPT-OSS's mixture-of-experts ops: the clamped
// SwiGLU, the top-k router, and the dispatch / gather / combine that group a batch's choices by
// expert — every backend and precision against the fp32 reference on the same inputs. Index
// outputs (the router's experts, the dispatch) must be identical; the rest within the backend's
// tolerances, the worst printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "ops_harness.h"

namespace air::engine {
namespace {

using testing::OpsHarness;
using testing::Pair;
using testing::RandomVector;
using testing::RoundedTo;
using testing::Sides;

TEST_P(OpsHarness, ClampedSwigluForwardBackward) {
  if (!Runs(OpKind::kClampedSwigluForward) || !Runs(OpKind::kClampedSwigluBackward)) return;
  const auto& p = precision();
  const int64_t rows = 300, inter = 67;  // ragged, over several threads
  const float alpha = 1.702f, limit = 7.0f;
  // |values| up to ~20: many gates above the limit and ups outside +-limit.
  auto gate_up = In(static_cast<size_t>(rows * 2 * inter), 50, 10.0f);
  auto dout = Grad(static_cast<size_t>(rows * inter), 51);
  Sides d(*backend_, ref_);
  const Pair gu = d.Data(gate_up, p.in, {rows, 2 * inter});
  const Pair out = d.Data(std::vector<float>(rows * inter), p.out, {rows, inter});
  backend_->ClampedSwigluForward(gu.got, alpha, limit, out.got);
  ref_.ClampedSwigluForward(gu.want, alpha, limit, out.want);
  Expect("clamped_swiglu", d.Error(out), tol().rowwise, "forward");
  const auto init = RoundedTo(RandomVector(static_cast<size_t>(rows * 2 * inter), 52), p.grad);
  const Pair dg = d.Data(init, p.grad, {rows, 2 * inter});
  const Pair dov = d.Data(dout, p.grad, {rows, inter});
  backend_->ClampedSwigluBackward(gu.got, alpha, limit, dov.got, dg.got);
  ref_.ClampedSwigluBackward(gu.want, alpha, limit, dov.want, dg.want);
  Expect("clamped_swiglu_bwd", d.Error(dg), tol().rowwise_backward, "dgate_up");
  // The clamps act: some inputs lie outside the limits, and their gradient is the initial value.
  int clamped = 0;
  const auto got = d.Got(dg);
  for (size_t i = 0; i < gate_up.size(); ++i) {
    const bool outside = i % 2 == 0 ? gate_up[i] > limit : std::fabs(gate_up[i]) > limit;
    if (outside) {
      ++clamped;
      ASSERT_EQ(got[i], init[i]) << "a clamped input got a gradient at " << i;
    }
  }
  EXPECT_GT(clamped, 100);
}

struct RouterCase {
  int64_t tokens, experts, k, dim;
};

TEST_P(OpsHarness, RouterTopKDispatchGatherCombine) {
  for (OpKind op :
       {OpKind::kRouterTopK, OpKind::kRouterTopKBackward, OpKind::kMoeDispatch, OpKind::kMoeGather,
        OpKind::kMoeGatherBackward, OpKind::kMoeCombine, OpKind::kMoeCombineBackward}) {
    if (!Runs(op)) return;
  }
  const auto& p = precision();
  // The last case's dim is a multiple of 8 (vectorized rows, as GPT-OSS's 2880).
  for (const RouterCase& rc :
       {RouterCase{1, 4, 2, 70}, RouterCase{257, 8, 2, 70}, RouterCase{130, 32, 4, 70},
        RouterCase{40, 5, 5, 70}, RouterCase{96, 32, 4, 192}}) {
    const int64_t n = rc.tokens, e = rc.experts, k = rc.k, dim = rc.dim;
    const std::string what =
        "N" + std::to_string(n) + " E" + std::to_string(e) + " k" + std::to_string(k);
    Sides d(*backend_, ref_);
    // The router: indices identical, weights within the row-wise tolerance.
    auto logits = In(static_cast<size_t>(n * e), 60, 3.0f);
    const Pair lv = d.Data(logits, p.in, {n, e});
    const Pair idx = d.I32(std::vector<int32_t>(n * k), {n, k});
    const Pair w = d.F32(std::vector<float>(n * k), {n, k});
    backend_->RouterTopK(lv.got, idx.got, w.got);
    ref_.RouterTopK(lv.want, idx.want, w.want);
    ASSERT_EQ(d.GotI32(idx), d.WantI32(idx)) << what;
    Expect("router", d.Error(w), tol().rowwise, what);
    // From here on both sides read the reference's choices and weights.
    const Pair experts = d.I32FromWant(idx), weights = d.FromWant(w, DType::kF32);
    auto dw = RandomVector(static_cast<size_t>(n * k), 61);
    auto dl0 = RoundedTo(RandomVector(static_cast<size_t>(n * e), 62), p.grad);
    const Pair dl = d.Data(dl0, p.grad, {n, e}), dwv = d.F32(dw, {n, k});
    backend_->RouterTopKBackward(experts.got, weights.got, dwv.got, dl.got);
    ref_.RouterTopKBackward(experts.want, weights.want, dwv.want, dl.want);
    Expect("router_bwd", d.Error(dl), tol().rowwise_backward, what);

    // The dispatch: identical index lists, each expert's rows contiguous and in token order.
    const Pair off = d.I32(std::vector<int32_t>(e + 1));
    const Pair tok = d.I32(std::vector<int32_t>(n * k));
    const Pair row = d.I32(std::vector<int32_t>(n * k), {n, k});
    backend_->MoeDispatch(experts.got, off.got, tok.got, row.got);
    ref_.MoeDispatch(experts.want, off.want, tok.want, row.want);
    const auto offsets = d.GotI32(off), tokens = d.GotI32(tok), rows = d.GotI32(row);
    const auto chosen = d.WantI32(experts);
    ASSERT_EQ(offsets, d.WantI32(off)) << what;
    ASSERT_EQ(tokens, d.WantI32(tok)) << what;
    ASSERT_EQ(rows, d.WantI32(row)) << what;
    ASSERT_EQ(offsets[e], n * k);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        const int32_t r = rows[t * k + j], x = chosen[t * k + j];
        ASSERT_EQ(tokens[r], t);
        ASSERT_TRUE(r >= offsets[x] && r < offsets[x + 1]) << what;
      }
    }

    // Gather (a copy: exact) and its backward.
    auto x = In(static_cast<size_t>(n * dim), 63);
    const Pair xv = d.Data(x, p.in, {n, dim});
    const Pair grouped = d.Data(std::vector<float>(n * k * dim), p.out, {n * k, dim});
    backend_->MoeGather(xv.got, tok.got, grouped.got);
    ref_.MoeGather(xv.want, tok.want, grouped.want);
    EXPECT_EQ(d.Got(grouped), d.Want(grouped)) << what;
    auto dgrouped = Grad(static_cast<size_t>(n * k * dim), 64);
    auto dx0 = RoundedTo(RandomVector(static_cast<size_t>(n * dim), 65), p.grad);
    const Pair dx = d.Data(dx0, p.grad, {n, dim}), dgv = d.Data(dgrouped, p.grad, {n * k, dim});
    backend_->MoeGatherBackward(dgv.got, row.got, dx.got);
    ref_.MoeGatherBackward(dgv.want, row.want, dx.want);
    Expect("moe_gather_bwd", d.Error(dx), tol().rowwise_backward, what);

    // Combine and its backward.
    auto y = In(static_cast<size_t>(n * k * dim), 66);
    const Pair yv = d.Data(y, p.in, {n * k, dim});
    const Pair out = d.Data(std::vector<float>(n * dim, NAN), p.out, {n, dim});  // written
    backend_->MoeCombine(yv.got, weights.got, row.got, out.got);
    ref_.MoeCombine(yv.want, weights.want, row.want, out.want);
    Expect("moe_combine", d.Error(out), tol().rowwise, what);
    auto dout = Grad(static_cast<size_t>(n * dim), 67);
    const Pair dy = d.Data(std::vector<float>(n * k * dim, NAN), p.grad, {n * k, dim});
    auto dw0 = RandomVector(static_cast<size_t>(n * k), 68);
    const Pair dwc = d.F32(dw0, {n, k}), dov = d.Data(dout, p.grad, {n, dim});
    backend_->MoeCombineBackward(yv.got, weights.got, row.got, dov.got, dy.got, dwc.got);
    ref_.MoeCombineBackward(yv.want, weights.want, row.want, dov.want, dy.want, dwc.want);
    Expect("moe_combine_bwd", d.Error(dy), tol().rowwise_backward, what);
    Expect("moe_combine_dweights", d.Error(dwc), tol().reduction_relative, what);
  }
}

}  // namespace
}  // namespace air::engine
