// Tests for LoraLinear (engine/lora/lora_linear.h), the LoRA branch y += scaling B A dropout(x),
// on the reference and fast backends: the backward's gradients of A, B and x equal central
// differences of the forward (the branch is linear in each of them, so the differences are exact
// up to fp32 rounding) with dropout active — the backward draws the forward's mask again — and
// without; a training forward repeats its mask for the same seed, draws another for another seed,
// and an evaluation forward drops nothing. ExpertLora (LoRA on a per-expert weight, PEFT's
// target_parameters): its branch equals x_e times PEFT's ParamWrapper delta, built as PEFT builds
// it from its lora_B layout (out, r*E) (einsum "o r e, e r i -> e i o" times scaling), on rows
// grouped by expert with an expert that gets none; its backward equals central differences.
#include "engine/lora/lora_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/backend/registry.h"
#include "unit/engine_core/op_test_util.h"

namespace air::engine::lora {
namespace {

using testing::DeviceArrays;

constexpr int64_t kRows = 4, kIn = 6, kOut = 5, kRank = 3;
constexpr float kScaling = 2.0f;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// L = sum(w * y).
double WeightedSum(const std::vector<float>& y, const std::vector<float>& w) {
  double l = 0.0;
  for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(w[i]) * y[i];
  return l;
}

struct Fixture {
  explicit Fixture(const std::string& kind, float dropout)
      : backend(CreateBackend({.kind = kind, .num_threads = 1}).value()), arrays(*backend) {
    a.shape = {kRank, kIn};
    b.shape = {kOut, kRank};
    a.value = arrays.F32(Random(kRank * kIn, 1), a.shape);
    b.value = arrays.F32(Random(kOut * kRank, 2), b.shape);
    a.grad = arrays.F32(std::vector<float>(kRank * kIn, 0.0f), a.shape);
    b.grad = arrays.F32(std::vector<float>(kOut * kRank, 0.0f), b.shape);
    scratch = std::make_unique<LoraScratch>(backend.get(), kRank,
                                            std::vector<int64_t>{dropout > 0 ? kIn : 0});
    EXPECT_TRUE(scratch->Reserve(kRows, DType::kF32).ok());
    adapter = std::make_unique<LoraLinear>(&a, &b, kScaling, dropout, 0, scratch.get());
  }

  // y = the branch of x alone (no base product).
  std::vector<float> Forward(const std::vector<float>& x, const LinearPass& pass) {
    View xv = arrays.F32(x, {kRows, kIn});
    View y = arrays.F32(std::vector<float>(kRows * kOut, 0.0f), {kRows, kOut});
    adapter->Forward(*backend, pass, xv, y);
    return arrays.Get(y);
  }
  double Loss(const std::vector<float>& x, const std::vector<float>& w, const LinearPass& pass) {
    return WeightedSum(Forward(x, pass), w);
  }

  std::shared_ptr<Backend> backend;
  DeviceArrays arrays;
  Parameter a, b;
  std::unique_ptr<LoraScratch> scratch;
  std::unique_ptr<LoraLinear> adapter;
};

// dL/dv[i] by central differences, v one of x, A, B (L is linear in each: h need not be small).
template <typename Set>
std::vector<double> Differences(std::vector<float> v, const Set& set_and_loss) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float keep = v[i];
    v[i] = keep + 0.5f;
    const double plus = set_and_loss(v);
    v[i] = keep - 0.5f;
    const double minus = set_and_loss(v);
    v[i] = keep;
    out[i] = plus - minus;
  }
  set_and_loss(v);  // restores the original values
  return out;
}

double MaxDiff(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return worst / (1.0 + scale);
}

class LoraLinearTest : public ::testing::TestWithParam<std::tuple<std::string, float>> {};

TEST_P(LoraLinearTest, BackwardEqualsDifferencesOfTheForward) {
  const auto [kind, dropout] = GetParam();
  Fixture f(kind, dropout);
  const std::vector<float> x = Random(kRows * kIn, 3), w = Random(kRows * kOut, 4);
  const LinearPass pass{.training = true, .seed = 77};

  // Analytic: a training forward, then the backward with dy = w.
  View xv = f.arrays.F32(x, {kRows, kIn});
  View y = f.arrays.F32(std::vector<float>(kRows * kOut, 0.0f), {kRows, kOut});
  f.adapter->Forward(*f.backend, pass, xv, y);
  View dy = f.arrays.F32(w, {kRows, kOut});
  View dx = f.arrays.F32(std::vector<float>(kRows * kIn, 0.0f), {kRows, kIn});
  f.adapter->Backward(*f.backend, pass, xv, dy, dx);
  ASSERT_TRUE(f.scratch->status().ok());
  const std::vector<float> grad_x = f.arrays.Get(dx), grad_a = f.arrays.Get(f.a.grad),
                           grad_b = f.arrays.Get(f.b.grad);

  // Numeric.
  const std::vector<double> num_x =
      Differences(x, [&](const std::vector<float>& v) { return f.Loss(v, w, pass); });
  auto through = [&](Parameter& p) {
    return [&](const std::vector<float>& v) {
      f.backend->FromHostTensor(p.value, v.data());
      return f.Loss(x, w, pass);
    };
  };
  const std::vector<double> num_a = Differences(f.arrays.Get(f.a.value), through(f.a));
  const std::vector<double> num_b = Differences(f.arrays.Get(f.b.value), through(f.b));
  EXPECT_LT(MaxDiff(grad_x, num_x), 1e-5) << kind;
  EXPECT_LT(MaxDiff(grad_a, num_a), 1e-5) << kind;
  EXPECT_LT(MaxDiff(grad_b, num_b), 1e-5) << kind;

  // With dropout some input elements are dropped: their gradient is exactly 0.
  int zeros = 0;
  for (double g : num_x) zeros += g == 0.0;
  if (dropout > 0) {
    EXPECT_GT(zeros, 0) << "no element dropped";
  } else {
    EXPECT_EQ(zeros, 0);
  }
}

class LoraDropoutTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraDropoutTest, MasksRepeatPerSeedAndEvaluationDropsNothing) {
  const std::string kind = GetParam();
  Fixture f(kind, 0.4f);
  const std::vector<float> x = Random(kRows * kIn, 5);
  const std::vector<float> first = f.Forward(x, {.training = true, .seed = 1});
  EXPECT_EQ(f.Forward(x, {.training = true, .seed = 1}), first);  // recomputation, resume
  EXPECT_NE(f.Forward(x, {.training = true, .seed = 2}), first);
  // Evaluation: no mask, the same as a training forward with dropout 0.
  Fixture plain(kind, 0.0f);
  const std::vector<float> eval = f.Forward(x, {.training = false, .seed = 1});
  const std::vector<float> want = plain.Forward(x, {.training = true, .seed = 1});
  ASSERT_EQ(eval.size(), want.size());
  for (size_t i = 0; i < eval.size(); ++i) EXPECT_NEAR(eval[i], want[i], 1e-6) << i;
}

// The backward applies the mask the forward drew and kept (it draws none): a backward whose pass
// names another seed gives the gradients of the forward's mask, bit for bit.
TEST_P(LoraDropoutTest, TheBackwardUsesTheForwardsKeptMask) {
  const std::string kind = GetParam();
  const std::vector<float> x = Random(kRows * kIn, 5), w = Random(kRows * kOut, 6);
  auto gradients = [&](uint64_t backward_seed) {
    Fixture f(kind, 0.4f);
    const View xv = f.arrays.F32(x, {kRows, kIn});
    const View y = f.arrays.F32(std::vector<float>(kRows * kOut, 0.0f), {kRows, kOut});
    f.adapter->Forward(*f.backend, {.training = true, .seed = 1}, xv, y);
    const View dy = f.arrays.F32(w, {kRows, kOut});
    const View dx = f.arrays.F32(std::vector<float>(kRows * kIn, 0.0f), {kRows, kIn});
    f.adapter->Backward(*f.backend, {.training = true, .seed = backward_seed}, xv, dy, dx);
    return std::vector<std::vector<float>>{f.arrays.Get(dx), f.arrays.Get(f.a.grad),
                                           f.arrays.Get(f.b.grad)};
  };
  EXPECT_EQ(gradients(2), gradients(1));
}

// ExpertLora over E experts, rows grouped by expert (expert 1 gets none).
constexpr int64_t kExperts = 3, kExpertRows = 5;
const std::vector<int32_t> kOffsets = {0, 2, 2, 5};

struct ExpertFixture {
  explicit ExpertFixture(const std::string& kind)
      : backend(CreateBackend({.kind = kind, .num_threads = 1}).value()), arrays(*backend) {
    a.shape = {kExperts * kRank, kIn};
    b.shape = {kExperts, kOut, kRank};
    a.value = arrays.F32(Random(kExperts * kRank * kIn, 11), a.shape);
    b.value = arrays.F32(Random(kExperts * kOut * kRank, 12), b.shape);
    a.grad = arrays.F32(std::vector<float>(kExperts * kRank * kIn, 0.0f), a.shape);
    b.grad = arrays.F32(std::vector<float>(kExperts * kOut * kRank, 0.0f), b.shape);
    scratch = std::make_unique<LoraScratch>(backend.get(), kRank, std::vector<int64_t>{0});
    EXPECT_TRUE(scratch->Reserve(kExpertRows, DType::kF32).ok());
    adapter = std::make_unique<ExpertLora>(&a, &b, kScaling, 0, scratch.get());
    offsets = arrays.I32(kOffsets);  // in the backend's memory, as MoeDispatch leaves them
  }
  std::vector<float> Forward(const std::vector<float>& x, const LinearPass& pass) {
    View xv = arrays.F32(x, {kExpertRows, kIn});
    View y = arrays.F32(std::vector<float>(kExpertRows * kOut, 0.0f), {kExpertRows, kOut});
    adapter->Forward(*backend, pass, xv, offsets, y);
    return arrays.Get(y);
  }
  double Loss(const std::vector<float>& x, const std::vector<float>& w) {
    return WeightedSum(Forward(x, {.training = true}), w);
  }

  std::shared_ptr<Backend> backend;
  DeviceArrays arrays;
  Parameter a, b;
  std::unique_ptr<LoraScratch> scratch;
  std::unique_ptr<ExpertLora> adapter;
  View offsets;
};

class ExpertLoraTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExpertLoraTest, BranchIsPeftsParamWrapperDelta) {
  ExpertFixture f(GetParam());
  const std::vector<float> x = Random(kExpertRows * kIn, 13);
  const std::vector<float> got = f.Forward(x, {.training = false});
  const std::vector<float> a = f.arrays.Get(f.a.value), held = f.arrays.Get(f.b.value);
  // PEFT's lora_B (out, r*E): expert e's column j at j*E + e.
  std::vector<float> peft_b(kOut * kRank * kExperts);
  for (int64_t e = 0; e < kExperts; ++e) {
    for (int64_t o = 0; o < kOut; ++o) {
      for (int64_t j = 0; j < kRank; ++j) {
        peft_b[o * kRank * kExperts + j * kExperts + e] = held[(e * kOut + o) * kRank + j];
      }
    }
  }
  for (int64_t e = 0; e < kExperts; ++e) {
    // delta_e[i][o] = scaling * sum_j A[e*r + j][i] * B[o][j*E + e]
    std::vector<double> delta(kIn * kOut, 0.0);
    for (int64_t i = 0; i < kIn; ++i) {
      for (int64_t o = 0; o < kOut; ++o) {
        for (int64_t j = 0; j < kRank; ++j) {
          delta[i * kOut + o] += static_cast<double>(a[(e * kRank + j) * kIn + i]) *
                                 peft_b[o * kRank * kExperts + j * kExperts + e];
        }
        delta[i * kOut + o] *= kScaling;
      }
    }
    for (int64_t row = kOffsets[e]; row < kOffsets[e + 1]; ++row) {
      for (int64_t o = 0; o < kOut; ++o) {
        double want = 0.0;
        for (int64_t i = 0; i < kIn; ++i) want += x[row * kIn + i] * delta[i * kOut + o];
        EXPECT_NEAR(got[row * kOut + o], want, 1e-5) << "expert " << e << " row " << row;
      }
    }
  }
}

TEST_P(ExpertLoraTest, BackwardEqualsDifferencesOfTheForward) {
  ExpertFixture f(GetParam());
  const std::vector<float> x = Random(kExpertRows * kIn, 14), w = Random(kExpertRows * kOut, 15);
  const LinearPass pass{.training = true};
  View xv = f.arrays.F32(x, {kExpertRows, kIn});
  View y = f.arrays.F32(std::vector<float>(kExpertRows * kOut, 0.0f), {kExpertRows, kOut});
  f.adapter->Forward(*f.backend, pass, xv, f.offsets, y);
  View dy = f.arrays.F32(w, {kExpertRows, kOut});
  View dx = f.arrays.F32(std::vector<float>(kExpertRows * kIn, 0.0f), {kExpertRows, kIn});
  f.adapter->Backward(*f.backend, pass, xv, f.offsets, dy, dx);
  ASSERT_TRUE(f.scratch->status().ok());
  const std::vector<float> grad_x = f.arrays.Get(dx), grad_a = f.arrays.Get(f.a.grad),
                           grad_b = f.arrays.Get(f.b.grad);
  const std::vector<double> num_x =
      Differences(x, [&](const std::vector<float>& v) { return f.Loss(v, w); });
  auto through = [&](Parameter& p) {
    return [&](const std::vector<float>& v) {
      f.backend->FromHostTensor(p.value, v.data());
      return f.Loss(x, w);
    };
  };
  const std::vector<double> num_a = Differences(f.arrays.Get(f.a.value), through(f.a));
  const std::vector<double> num_b = Differences(f.arrays.Get(f.b.value), through(f.b));
  EXPECT_LT(MaxDiff(grad_x, num_x), 1e-5);
  EXPECT_LT(MaxDiff(grad_a, num_a), 1e-5);
  EXPECT_LT(MaxDiff(grad_b, num_b), 1e-5);
  // Expert 1 saw no rows: its A_1 and B_1 get no gradient.
  for (int64_t i = kRank * kIn; i < 2 * kRank * kIn; ++i) EXPECT_EQ(grad_a[i], 0.0f);
  for (int64_t i = kOut * kRank; i < 2 * kOut * kRank; ++i) EXPECT_EQ(grad_b[i], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Backends, ExpertLoraTest, ::testing::Values("reference", "fast"));

INSTANTIATE_TEST_SUITE_P(Backends, LoraLinearTest,
                         ::testing::Combine(::testing::Values("reference", "fast"),
                                            ::testing::Values(0.0f, 0.4f)));
INSTANTIATE_TEST_SUITE_P(Backends, LoraDropoutTest, ::testing::Values("reference", "fast"));

}  // namespace
}  // namespace air::engine::lora
