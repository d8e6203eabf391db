// Tests for the optimizer pieces on hand-computed values: AdamW (one and two steps, weight
// decay only on 2-D tensors; adjacent parameters updated by one call, the same bits), the
// learning-rate schedules at their boundary steps, and global norm clipping.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <memory>
#include <vector>

#include "engine/backend/cpu/fast_ops.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/train/adamw.h"
#include "engine/train/grad_clip.h"
#include "engine/train/lr_schedule.h"

namespace air::engine::train {
namespace {

const ReferenceOps kOps;  // the update rules are checked on the reference backend

// The device scalar the gradient norm accumulates in (reference backend: host memory).
struct NormSlot {
  NormSlot() : buffer(std::move(kOps.AllocateView(DType::kF64, {1}, &view)).value()) {}
  air::engine::View view;
  std::unique_ptr<Buffer> buffer;
};

// An F32 view of a host vector (the reference backend's memory is host memory): a borrowed
// buffer (no owner: nothing is freed), kept for the life of the test program.
air::engine::View Borrow(std::vector<float>& host) {
  static std::deque<std::unique_ptr<Buffer>> borrowed;
  borrowed.push_back(
      std::make_unique<Buffer>(nullptr, Device{}, host.data(), host.size() * sizeof(float)));
  return air::engine::View(borrowed.back().get(), 0, DType::kF32,
                           {static_cast<int64_t>(host.size())});
}

ParamView View(const std::string& name, std::vector<int64_t> shape, std::vector<float>& value,
               std::vector<float>& grad) {
  const bool decay = shape.size() >= 2;
  return ParamView{
      name, std::move(shape), Borrow(value), Borrow(grad), static_cast<int64_t>(value.size()),
      decay};
}

TEST(AdamWTest, FirstStepByHand) {
  // p = 1, g = 0.5, lr = 0.1, wd = 0.01: decay to 0.999; m = 0.05, v = 0.00025; bias-corrected
  // m_hat = 0.5, sqrt(v_hat) = 0.5, so the update is lr * 1 = 0.1 -> 0.899. The 1-D tensor (a
  // norm weight) is not decayed -> 0.9.
  std::vector<float> w = {1.0f}, gw = {0.5f}, n = {1.0f}, gn = {0.5f};
  auto opt =
      std::move(AdamW::Create({View("w", {1, 1}, w, gw), View("norm.weight", {1}, n, gn)},
                              {.beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8, .weight_decay = 0.01},
                              kOps))
          .value();
  opt->Step(0.1);
  EXPECT_NEAR(w[0], 0.899f, 1e-6);
  EXPECT_NEAR(n[0], 0.9f, 1e-6);
  EXPECT_NEAR(opt->first_moment(0)[0], 0.05f, 1e-7);
  EXPECT_NEAR(opt->second_moment(0)[0], 0.00025f, 1e-9);
  EXPECT_EQ(opt->step_count(), 1);
}

TEST(AdamWTest, SecondStepUsesBiasCorrectionOfStepTwo) {
  std::vector<float> w = {1.0f}, g = {0.5f};
  auto opt =
      std::move(AdamW::Create({View("w", {1, 1}, w, g)}, {.weight_decay = 0.01}, kOps)).value();
  opt->Step(0.1);
  g[0] = -0.5f;
  opt->Step(0.05);
  // By hand, in double: decay, moments, bias corrections of t = 2, eps outside the sqrt.
  double p = 0.899 * (1 - 0.05 * 0.01);
  double m = 0.9 * 0.05 + 0.1 * -0.5;
  double v = 0.999 * 0.00025 + 0.001 * 0.25;
  double step_size = 0.05 / (1 - 0.9 * 0.9);
  double denom = std::sqrt(v) / std::sqrt(1 - 0.999 * 0.999) + 1e-8;
  p -= step_size * m / denom;
  EXPECT_NEAR(w[0], p, 1e-6);
}

TEST(AdamWTest, EpsilonIsOutsideTheSquareRoot) {
  // With a zero gradient m = v = 0, the update is 0 / (0 + eps) = 0 whatever eps is; with a huge
  // eps the update shrinks towards lr * m_hat / eps.
  std::vector<float> w = {0.0f}, g = {1.0f};
  auto opt = std::move(AdamW::Create({View("b", {1}, w, g)}, {.epsilon = 1.0}, kOps)).value();
  opt->Step(1.0);
  // m_hat = 1, sqrt(v_hat) = 1, denom = 1 + 1 = 2 -> update 0.5.
  EXPECT_NEAR(w[0], -0.5f, 1e-6);
}

TEST(AdamWTest, ZeroLearningRateLeavesWeightsButAdvancesMoments) {
  std::vector<float> w = {2.0f, -3.0f}, g = {1.0f, 1.0f};
  auto opt =
      std::move(AdamW::Create({View("w", {2, 1}, w, g)}, {.weight_decay = 0.1}, kOps)).value();
  opt->Step(0.0);
  EXPECT_EQ(w[0], 2.0f);
  EXPECT_EQ(w[1], -3.0f);
  EXPECT_NEAR(opt->first_moment(0)[0], 0.1f, 1e-7);
}

// The fast backend, counting the AdamW updates it runs (each call then runs as usual).
class CountingFastOps : public FastOps {
 public:
  explicit CountingFastOps(int threads) : FastOps(threads) {}
  mutable int adamw_calls = 0;

 protected:
  void AdamWUpdateKernel(const AdamWScalars& s, const air::engine::View& p,
                         const air::engine::View& g, const air::engine::View& m,
                         const air::engine::View& v,
                         const air::engine::View& p_copy) const override {
    ++adamw_calls;
    FastOps::AdamWUpdateKernel(s, p, g, m, v, p_copy);
  }
};

// Parameters next to each other in one value and one gradient buffer (a unit's flat buffers)
// with the same decay are updated by one call over them all: two matrices then a norm weight are
// two calls, not three, and give the bits of one call per parameter in buffers of their own.
TEST(AdamWTest, AdjacentParametersAreOneUpdateWithTheSameBits) {
  const std::vector<int64_t> sizes = {40000, 70001, 33};  // over several pieces and threads
  const std::vector<std::vector<int64_t>> shapes = {{200, 200}, {70001, 1}, {33}};
  std::vector<float> values, grads;
  for (size_t t = 0; t < sizes.size(); ++t) {
    for (int64_t i = 0; i < sizes[t]; ++i) {
      values.push_back(std::sin(0.37f * static_cast<float>(i + 1000 * t)));
      grads.push_back(std::cos(0.11f * static_cast<float>(i) + static_cast<float>(t)));
    }
  }
  std::vector<std::vector<float>> own_values, own_grads;  // one buffer per parameter
  int64_t offset = 0;
  for (int64_t n : sizes) {
    own_values.emplace_back(values.begin() + offset, values.begin() + offset + n);
    own_grads.emplace_back(grads.begin() + offset, grads.begin() + offset + n);
    offset += n;
  }
  const air::engine::View flat_values = Borrow(values), flat_grads = Borrow(grads);
  std::vector<ParamView> joined, apart;
  offset = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    ParamView p = View("p" + std::to_string(t), shapes[t], own_values[t], own_grads[t]);
    apart.push_back(p);
    p.value = flat_values.Slice(offset, sizes[t]);
    p.grad = flat_grads.Slice(offset, sizes[t]);
    joined.push_back(p);
    offset += sizes[t];
  }
  CountingFastOps joined_ops(3), apart_ops(3);
  const AdamWOptions options{.weight_decay = 0.01};
  auto joined_opt = std::move(AdamW::Create(joined, options, joined_ops)).value();
  auto apart_opt = std::move(AdamW::Create(apart, options, apart_ops)).value();
  for (int step = 0; step < 3; ++step) {
    joined_opt->Step(1e-2, 0.5f);
    apart_opt->Step(1e-2, 0.5f);
  }
  EXPECT_EQ(joined_ops.adamw_calls, 3 * 2);  // {p0, p1} decayed, then p2 alone
  EXPECT_EQ(apart_ops.adamw_calls, 3 * 3);
  offset = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    EXPECT_EQ(std::vector<float>(values.begin() + offset, values.begin() + offset + sizes[t]),
              own_values[t])
        << "parameter " << t;
    EXPECT_EQ(joined_opt->first_moment(t), apart_opt->first_moment(t)) << t;
    EXPECT_EQ(joined_opt->second_moment(t), apart_opt->second_moment(t)) << t;
    offset += sizes[t];
  }
}

TEST(LrScheduleTest, CosineWithWarmupBoundaries) {
  LrSchedule s(LrSchedulerType::kCosine, 1e-3, 2, 10);
  EXPECT_DOUBLE_EQ(s.Multiplier(0), 0.0);  // the first update uses lr 0, as transformers does
  EXPECT_DOUBLE_EQ(s.Multiplier(1), 0.5);
  EXPECT_DOUBLE_EQ(s.Multiplier(2), 1.0);
  EXPECT_NEAR(s.Multiplier(6), 0.5, 1e-12);
  EXPECT_NEAR(s.Multiplier(4), 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-12);
  EXPECT_NEAR(s.Multiplier(10), 0.0, 1e-12);
  // Past the end the half cosine turns back up, exactly as transformers' formula does.
  EXPECT_NEAR(s.Multiplier(12), 0.5 * (1 + std::cos(M_PI * 10.0 / 8.0)), 1e-12);
  EXPECT_NEAR(s.LearningRate(1), 5e-4, 1e-15);
}

TEST(LrScheduleTest, LinearWithWarmupBoundaries) {
  LrSchedule s(LrSchedulerType::kLinear, 1.0, 2, 10);
  EXPECT_DOUBLE_EQ(s.Multiplier(0), 0.0);
  EXPECT_DOUBLE_EQ(s.Multiplier(2), 1.0);
  EXPECT_DOUBLE_EQ(s.Multiplier(6), 0.5);
  EXPECT_DOUBLE_EQ(s.Multiplier(9), 1.0 / 8);
  EXPECT_DOUBLE_EQ(s.Multiplier(10), 0.0);
  EXPECT_DOUBLE_EQ(s.Multiplier(11), 0.0);
}

TEST(LrScheduleTest, NoWarmupStartsAtFullRate) {
  EXPECT_DOUBLE_EQ(LrSchedule(LrSchedulerType::kCosine, 1.0, 0, 10).Multiplier(0), 1.0);
  EXPECT_DOUBLE_EQ(LrSchedule(LrSchedulerType::kLinear, 1.0, 0, 10).Multiplier(0), 1.0);
  EXPECT_DOUBLE_EQ(LrSchedule(LrSchedulerType::kLinear, 1.0, 0, 10).Multiplier(5), 0.5);
}

TEST(LrScheduleTest, ConstantAndConstantWithWarmup) {
  LrSchedule c(LrSchedulerType::kConstant, 1.0, 0, 10);
  EXPECT_DOUBLE_EQ(c.Multiplier(0), 1.0);
  EXPECT_DOUBLE_EQ(c.Multiplier(100), 1.0);
  LrSchedule w(LrSchedulerType::kConstantWithWarmup, 1.0, 4, 10);
  EXPECT_DOUBLE_EQ(w.Multiplier(0), 0.0);
  EXPECT_DOUBLE_EQ(w.Multiplier(1), 0.25);
  EXPECT_DOUBLE_EQ(w.Multiplier(4), 1.0);
  EXPECT_DOUBLE_EQ(w.Multiplier(10), 1.0);
}

TEST(LrScheduleTest, WarmupAsLongAsTheRun) {
  // W == N: the decay span is max(1, 0) = 1, so the last steps are warmup only.
  LrSchedule s(LrSchedulerType::kCosine, 1.0, 4, 4);
  EXPECT_DOUBLE_EQ(s.Multiplier(3), 0.75);
  EXPECT_DOUBLE_EQ(s.Multiplier(4), 1.0);
}

TEST(GradClipTest, NormAndTorchsClampedCoefficient) {
  std::vector<float> a = {0, 0}, ga = {3.0f, 0.0f}, b = {0}, gb = {4.0f};
  std::vector<ParamView> params = {View("a", {2, 1}, a, ga), View("b", {1}, b, gb)};
  NormSlot slot;
  EXPECT_NEAR(GlobalGradNorm(params, kOps, slot.view), 5.0, 1e-12);
  EXPECT_EQ(ClipCoefficient(5.0, 1.0), static_cast<float>(1.0 / (5.0 + 1e-6)));
  EXPECT_EQ(ClipCoefficient(0.5, 1.0), 1.0f);   // small gradients are left alone
  EXPECT_EQ(ClipCoefficient(50.0, 0.0), 1.0f);  // max_norm 0 disables clipping
}

// Step(lr, coef) gives the bits of scaling every gradient by coef first (what
// clip_grad_norm_ does in place) and then stepping.
TEST(GradClipTest, StepWithTheCoefficientIsScalingTheGradientsFirst) {
  std::vector<float> w1 = {0.5f, -1.0f}, g1 = {3.0f, 4.0f}, w2 = w1, g2 = g1;
  auto fused =
      std::move(AdamW::Create({View("w", {2, 1}, w1, g1)}, {.weight_decay = 0.01}, kOps)).value();
  auto scaled =
      std::move(AdamW::Create({View("w", {2, 1}, w2, g2)}, {.weight_decay = 0.01}, kOps)).value();
  const float coef = ClipCoefficient(5.0, 1.0);
  for (int step = 0; step < 3; ++step) {
    fused->Step(1e-2, coef);
    std::vector<float> scaled_grads = {g2[0] * coef, g2[1] * coef};
    std::swap(g2, scaled_grads);
    scaled->Step(1e-2);
    std::swap(g2, scaled_grads);
  }
  EXPECT_EQ(w1, w2);
  EXPECT_EQ(g1, g2);  // the gradients themselves are left as they were
}

}  // namespace
}  // namespace air::engine::train
