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

using testing::DeviceArrays;
using testing::OpsHarness;
using testing::RandomVector;
using testing::RoundedTo;
using testing::ScaledMaxDiff;

std::vector<int32_t> GetI32(const Backend& backend, const View& v) {
  std::vector<int32_t> out(static_cast<size_t>(v.numel()));
  backend.CopyToHost(out.data(), v);
  return out;
}

TEST_P(OpsHarness, ClampedSwigluForwardBackward) {
  if (!Runs(OpKind::kClampedSwigluForward) || !Runs(OpKind::kClampedSwigluBackward)) return;
  const auto& p = precision();
  const int64_t rows = 300, inter = 67;  // ragged, over several threads
  const float alpha = 1.702f, limit = 7.0f;
  // |values| up to ~20: many gates above the limit and ups outside +-limit.
  auto gate_up = In(static_cast<size_t>(rows * 2 * inter), 50, 10.0f);
  auto dout = Grad(static_cast<size_t>(rows * inter), 51);
  DeviceArrays d(*backend_);
  const View gu = d.Data(gate_up, p.in, {rows, 2 * inter}),
             gu_ref = d.F32(gate_up, {rows, 2 * inter});
  const View out = d.Data(std::vector<float>(rows * inter), p.out, {rows, inter});
  const View out_want = d.F32(std::vector<float>(rows * inter), {rows, inter});
  backend_->ClampedSwigluForward(gu, alpha, limit, out);
  ref_.ClampedSwigluForward(gu_ref, alpha, limit, out_want);
  Expect("clamped_swiglu", ScaledMaxDiff(d.Get(out), d.Get(out_want)), tol().rowwise, "forward");
  const auto init = RoundedTo(RandomVector(static_cast<size_t>(rows * 2 * inter), 52), p.grad);
  const View dg = d.Data(init, p.grad, {rows, 2 * inter}), dg_want = d.F32(init, {rows, 2 * inter});
  backend_->ClampedSwigluBackward(gu, alpha, limit, d.Data(dout, p.grad, {rows, inter}), dg);
  ref_.ClampedSwigluBackward(gu_ref, alpha, limit, d.F32(dout, {rows, inter}), dg_want);
  Expect("clamped_swiglu_bwd", ScaledMaxDiff(d.Get(dg), d.Get(dg_want)), tol().rowwise_backward,
         "dgate_up");
  // The clamps act: some inputs lie outside the limits, and their gradient is the initial value.
  int clamped = 0;
  const auto got = d.Get(dg);
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
  int64_t tokens, experts, k;
};

TEST_P(OpsHarness, RouterTopKDispatchGatherCombine) {
  for (OpKind op :
       {OpKind::kRouterTopK, OpKind::kRouterTopKBackward, OpKind::kMoeDispatch, OpKind::kMoeGather,
        OpKind::kMoeGatherBackward, OpKind::kMoeCombine, OpKind::kMoeCombineBackward}) {
    if (!Runs(op)) return;
  }
  const auto& p = precision();
  for (const RouterCase& rc :
       {RouterCase{1, 4, 2}, RouterCase{257, 8, 2}, RouterCase{130, 32, 4}, RouterCase{40, 5, 5}}) {
    const int64_t n = rc.tokens, e = rc.experts, k = rc.k, dim = 70;
    const std::string what =
        "N" + std::to_string(n) + " E" + std::to_string(e) + " k" + std::to_string(k);
    DeviceArrays d(*backend_);
    // The router: indices identical, weights within the row-wise tolerance.
    auto logits = In(static_cast<size_t>(n * e), 60, 3.0f);
    const View lv = d.Data(logits, p.in, {n, e}), lr = d.F32(logits, {n, e});
    const View idx = d.I32(std::vector<int32_t>(n * k), {n, k});
    const View idx_want = d.I32(std::vector<int32_t>(n * k), {n, k});
    const View w = d.F32(std::vector<float>(n * k), {n, k});
    const View w_want = d.F32(std::vector<float>(n * k), {n, k});
    backend_->RouterTopK(lv, idx, w);
    ref_.RouterTopK(lr, idx_want, w_want);
    ASSERT_EQ(GetI32(*backend_, idx), GetI32(*backend_, idx_want)) << what;
    Expect("router", ScaledMaxDiff(d.Get(w), d.Get(w_want)), tol().rowwise, what);
    auto dw = RandomVector(static_cast<size_t>(n * k), 61);
    auto dl0 = RoundedTo(RandomVector(static_cast<size_t>(n * e), 62), p.grad);
    const View dl = d.Data(dl0, p.grad, {n, e}), dl_want = d.F32(dl0, {n, e});
    backend_->RouterTopKBackward(idx_want, w_want, d.F32(dw, {n, k}), dl);
    ref_.RouterTopKBackward(idx_want, w_want, d.F32(dw, {n, k}), dl_want);
    Expect("router_bwd", ScaledMaxDiff(d.Get(dl), d.Get(dl_want)), tol().rowwise_backward, what);

    // The dispatch: identical index lists, each expert's rows contiguous and in token order.
    const View off = d.I32(std::vector<int32_t>(e + 1)),
               off_want = d.I32(std::vector<int32_t>(e + 1));
    const View tok = d.I32(std::vector<int32_t>(n * k)),
               tok_want = d.I32(std::vector<int32_t>(n * k));
    const View row = d.I32(std::vector<int32_t>(n * k), {n, k});
    const View row_want = d.I32(std::vector<int32_t>(n * k), {n, k});
    backend_->MoeDispatch(idx_want, off, tok, row);
    ref_.MoeDispatch(idx_want, off_want, tok_want, row_want);
    const auto offsets = GetI32(*backend_, off), tokens = GetI32(*backend_, tok);
    const auto rows = GetI32(*backend_, row), experts = GetI32(*backend_, idx_want);
    ASSERT_EQ(offsets, GetI32(*backend_, off_want)) << what;
    ASSERT_EQ(tokens, GetI32(*backend_, tok_want)) << what;
    ASSERT_EQ(rows, GetI32(*backend_, row_want)) << what;
    ASSERT_EQ(offsets[e], n * k);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        const int32_t r = rows[t * k + j], x = experts[t * k + j];
        ASSERT_EQ(tokens[r], t);
        ASSERT_TRUE(r >= offsets[x] && r < offsets[x + 1]) << what;
      }
    }

    // Gather (a copy: exact) and its backward.
    auto x = In(static_cast<size_t>(n * dim), 63);
    const View grouped = d.Data(std::vector<float>(n * k * dim), p.out, {n * k, dim});
    const View grouped_want = d.F32(std::vector<float>(n * k * dim), {n * k, dim});
    backend_->MoeGather(d.Data(x, p.in, {n, dim}), tok_want, grouped);
    ref_.MoeGather(d.F32(x, {n, dim}), tok_want, grouped_want);
    EXPECT_EQ(d.Get(grouped), d.Get(grouped_want)) << what;
    auto dgrouped = Grad(static_cast<size_t>(n * k * dim), 64);
    auto dx0 = RoundedTo(RandomVector(static_cast<size_t>(n * dim), 65), p.grad);
    const View dx = d.Data(dx0, p.grad, {n, dim}), dx_want = d.F32(dx0, {n, dim});
    backend_->MoeGatherBackward(d.Data(dgrouped, p.grad, {n * k, dim}), row_want, dx);
    ref_.MoeGatherBackward(d.F32(dgrouped, {n * k, dim}), row_want, dx_want);
    Expect("moe_gather_bwd", ScaledMaxDiff(d.Get(dx), d.Get(dx_want)), tol().rowwise_backward,
           what);

    // Combine and its backward.
    auto y = In(static_cast<size_t>(n * k * dim), 66);
    const View yv = d.Data(y, p.in, {n * k, dim}), yr = d.F32(y, {n * k, dim});
    const View out = d.Data(std::vector<float>(n * dim, NAN), p.out, {n, dim});  // written
    const View out_want = d.F32(std::vector<float>(n * dim), {n, dim});
    backend_->MoeCombine(yv, w_want, row_want, out);
    ref_.MoeCombine(yr, w_want, row_want, out_want);
    Expect("moe_combine", ScaledMaxDiff(d.Get(out), d.Get(out_want)), tol().rowwise, what);
    auto dout = Grad(static_cast<size_t>(n * dim), 67);
    const View dy = d.Data(std::vector<float>(n * k * dim, NAN), p.grad, {n * k, dim});
    const View dy_want = d.F32(std::vector<float>(n * k * dim), {n * k, dim});
    auto dw0 = RandomVector(static_cast<size_t>(n * k), 68);
    const View dwv = d.F32(dw0, {n, k}), dw_want = d.F32(dw0, {n, k});
    backend_->MoeCombineBackward(yv, w_want, row_want, d.Data(dout, p.grad, {n, dim}), dy, dwv);
    ref_.MoeCombineBackward(yr, w_want, row_want, d.F32(dout, {n, dim}), dy_want, dw_want);
    Expect("moe_combine_bwd", ScaledMaxDiff(d.Get(dy), d.Get(dy_want)), tol().rowwise_backward,
           what);
    Expect("moe_combine_dweights", ScaledMaxDiff(d.Get(dwv), d.Get(dw_want)),
           tol().reduction_relative, what);
  }
}

}  // namespace
}  // namespace air::engine
