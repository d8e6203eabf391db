// Zeroing a step's gradients as PyTorch's zero_grad(set_to_none=True) does (CausalLm::
// ZeroUnitGradients): the linear layers' and an untied head's gradients are not zeroed but
// marked unwritten, and their first weight-gradient GEMM overwrites them. Gradient memory full of
// NaN (a previous step's values, whatever they are) must give the gradients of zeroed memory, bit
// for bit, over one micro-batch and over two accumulated; what no write reaches is zeroed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "llama_fixture.h"
#include "test_util.h"

namespace air::engine {
namespace {

using testing::Host;
using testing::TinyBatch;
using testing::TinyModel;

// Every trainable parameter's gradient, in parameter order.
std::vector<std::vector<float>> Gradients(CausalLm& model) {
  std::vector<std::vector<float>> out;
  for (Parameter& p : model.parameters()) {
    if (p.grad.empty()) continue;
    const auto g = Host(p.grad);
    out.emplace_back(g.begin(), g.end());
  }
  return out;
}

void FillGradients(CausalLm& model, float value) {
  for (Parameter& p : model.parameters()) {
    if (p.grad.empty()) continue;
    for (float& v : Host(p.grad)) v = value;
  }
}

// micro_batches forward/backward passes after ZeroGrads.
std::vector<std::vector<float>> Step(CausalLm& model, int micro_batches) {
  EXPECT_TRUE(model.ZeroGrads().ok());
  for (int i = 0; i < micro_batches; ++i) {
    EXPECT_TRUE(model.Forward(TinyBatch(), {.loss_scale = 0.5f}).ok());
    EXPECT_TRUE(model.Backward().ok());
  }
  return Gradients(model);
}

bool BitEqual(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

class GradientZeroing : public ::testing::TestWithParam<Architecture> {};

TEST_P(GradientZeroing, StaleGradientMemoryGivesTheGradientsOfZeroedMemory) {
  for (const std::string ops : {"reference", "fast"}) {
    for (int micro_batches : {1, 2}) {
      auto fresh = TinyModel(GetParam(), ops);
      auto stale = TinyModel(GetParam(), ops);
      ASSERT_TRUE(stale->ZeroGrads().ok());  // allocates the gradients
      FillGradients(*stale, std::numeric_limits<float>::quiet_NaN());
      EXPECT_TRUE(BitEqual(Step(*stale, micro_batches), Step(*fresh, micro_batches)))
          << ops << ", " << micro_batches << " micro-batches";
      // A second step over the first one's gradients: the same again.
      EXPECT_TRUE(BitEqual(Step(*stale, micro_batches), Step(*fresh, micro_batches)))
          << ops << ", second step";
    }
  }
}

// The linear layers' weights (and an untied head) are marked; norms, biases and the embedding
// (whose backward adds rows) are zeroed; a backward that never reaches an unwritten gradient
// leaves it zero.
TEST_P(GradientZeroing, OnlyOverwrittenGradientsAreLeftUnwrittenAndTheRestIsZeroed) {
  auto model = TinyModel(GetParam(), "fast");
  ASSERT_TRUE(model->ZeroGrads().ok());
  FillGradients(*model, 7.0f);
  ASSERT_TRUE(model->ZeroGrads().ok());
  int marked = 0;
  for (Parameter& p : model->parameters()) {
    const bool linear = p.name.find("attention.w") != std::string::npos ||
                        p.name.find("feed_forward.w") != std::string::npos;
    const bool weight = p.name.ends_with(".weight") && p.shape.size() == 2;
    const bool expected = (linear && weight) || p.name == "output.weight";
    EXPECT_EQ(p.grad_overwrites, expected) << p.name;
    EXPECT_EQ(p.grad_unwritten, expected) << p.name;
    if (!expected) {
      for (float v : Host(p.grad)) ASSERT_EQ(v, 0.0f) << p.name;
    }
    marked += expected;
  }
  EXPECT_EQ(marked, 7 * 2 + (model->FindParameter("output.weight") != nullptr ? 1 : 0));
  for (int unit = 0; unit < static_cast<int>(model->units().size()); ++unit) {
    model->FinishUnitGradients(unit);
  }
  for (Parameter& p : model->parameters()) {
    EXPECT_FALSE(p.grad_unwritten) << p.name;
    for (float v : Host(p.grad)) ASSERT_EQ(v, 0.0f) << p.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, GradientZeroing, ::testing::ValuesIn(testing::kArchs),
                         [](const ::testing::TestParamInfo<Architecture>& info) {
                           return ArchitectureModelType(info.param);
                         });

}  // namespace
}  // namespace air::engine
