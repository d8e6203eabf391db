// GptOssModel end to end on a tiny random model (2 layers, 4 experts top-2, a sliding window
// shorter than the batch, sinks, YaRN): model-level finite differences, activation
// checkpointing applied from outside (bit-identical), KV-cache decoding against the full
// forward, fast vs reference ops, bf16 compute against fp32, the unit hooks, the HF names of
// the state-dict adapter, save/load round trips, the MXFP4 fixture loaded whole and unit by unit
// (FSDP's path) bit for bit as transformers dequantizes it, and the errors for missing expert
// tensors and unsupported settings. Parity with transformers is tests/python/test_gpt_oss_model.py.
#include "engine/model/gpt_oss_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/io/hf_config.h"
#include "engine/io/hf_state_dict.h"
#include "engine/io/safetensors.h"
#include "engine/io/state_dict_adapter.h"
#include "engine/model/gpt_oss_config.h"
#include "engine/model/model_factory.h"
#include "engine/train/activation_checkpointing.h"
#include "gpt_oss_fixture.h"
#include "llama_fixture.h"  // TinyBatch: two rows, packed, padded
#include "test_util.h"

namespace air::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Host;
using testing::HostTensor;
using testing::MakeBackend;
using testing::ScratchDir;
using testing::TinyBatch;
using testing::TinyGptOssConfig;

std::unique_ptr<CausalLm> TinyModel(const std::string& ops = "reference", uint64_t seed = 1,
                                    const ModelOptions& options = {}) {
  auto model = CreateModel(TinyGptOssConfig(), MakeBackend(ops), options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  (*model)->InitWeights(seed);
  // Non-trivial norms, biases and sinks; livelier weights (the router's too: clear top-k gaps).
  std::mt19937_64 rng(seed + 100);
  std::normal_distribution<float> noise(0.0f, 0.2f);
  for (Parameter& p : (*model)->parameters()) {
    if (p.name.find("bias") != std::string::npos || p.shape.size() == 1) {
      for (float& v : Host(p.value)) v += noise(rng);
    } else {
      for (float& v : Host(p.value)) v *= p.name.find("router") != std::string::npos ? 20.0f : 4.0f;
    }
  }
  return std::move(model).value();
}

double RelativeDiff(const View& a, const View& b) {
  Tensor d = HostTensor(a);
  const Tensor tb = HostTensor(b);
  for (int64_t j = 0; j < d.numel(); ++j) d[j] -= tb[j];
  return L2Norm(d) / std::max(L2Norm(tb), 1e-20);
}

TEST(GptOssModel, GradientsMatchFiniteDifferencesOfTheLoss) {
  auto model = TinyModel();
  const TokenBatch batch = TinyBatch();
  ASSERT_TRUE(model->ZeroGrads().ok());
  ASSERT_TRUE(model->Forward(batch).ok());
  ASSERT_TRUE(model->Backward().ok());
  const float eps = 1e-3f;
  double worst = 0;
  int checked = 0;
  std::mt19937_64 rng(5);
  for (Parameter& p : model->parameters()) {
    for (int sample = 0; sample < 3; ++sample) {
      const int64_t i = static_cast<int64_t>(rng() % static_cast<uint64_t>(p.value.numel()));
      const float saved = Host(p.value)[i];
      Host(p.value)[i] = saved + eps;
      const double up = model->Forward(batch, {.training = false})->loss;
      Host(p.value)[i] = saved - eps;
      const double down = model->Forward(batch, {.training = false})->loss;
      Host(p.value)[i] = saved;
      const double numeric = (up - down) / (2.0 * eps);
      const double err = std::fabs(numeric - Host(p.grad)[i]) / (std::fabs(numeric) + 1e-3);
      worst = std::max(worst, err);
      EXPECT_LT(err, 3e-2) << p.name << "[" << i << "]: numeric " << numeric << " analytic "
                           << Host(p.grad)[i];
      ++checked;
    }
  }
  std::printf("[gpt-oss] finite differences: %d samples, worst relative error %.3g\n", checked,
              worst);
  EXPECT_GT(checked, 60);
}

TEST(GptOssModel, ActivationCheckpointingGivesBitIdenticalGradients) {
  auto plain = TinyModel("fast");
  auto ckpt = TinyModel("fast");
  train::ApplyActivationCheckpointing(*ckpt, true);
  const TokenBatch batch = TinyBatch();
  ASSERT_TRUE(plain->ZeroGrads().ok());
  ASSERT_TRUE(ckpt->ZeroGrads().ok());
  auto a = plain->Forward(batch, {.loss_scale = 0.5f});
  auto b = ckpt->Forward(batch, {.loss_scale = 0.5f});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->loss, b->loss);
  ASSERT_TRUE(plain->Backward().ok());
  ASSERT_TRUE(ckpt->Backward().ok());
  for (size_t i = 0; i < plain->parameters().size(); ++i) {
    const Parameter& p = plain->parameters()[i];
    EXPECT_EQ(MaxAbsDiff(HostTensor(p.grad), HostTensor(ckpt->parameters()[i].grad)), 0.0f)
        << p.name;
    EXPECT_GT(L2Norm(HostTensor(p.grad)), 0.0) << p.name << " has no gradient at all";
  }
}

TEST(GptOssModel, KvCacheDecodingMatchesTheFullForwardPastTheWindow) {
  auto model = TinyModel("fast");
  TokenBatch batch;
  batch.batch_size = 2;
  batch.seq_len = 11;  // longer than the sliding window (4)
  for (int i = 0; i < 22; ++i) batch.input_ids.push_back((i * 17 + 3) % 50);
  auto full = model->Forward(batch, {.training = false, .return_logits = true});
  ASSERT_TRUE(full.ok());
  KvCache cache = std::move(model->NewKvCache(2, 11)).value();
  const int64_t vocab = model->config().vocab_size;
  int64_t pos = 0;
  double worst = 0;
  for (int64_t step : {4, 1, 1, 3, 1, 1}) {
    std::vector<int32_t> tokens;
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t i = 0; i < step; ++i) tokens.push_back(batch.input_ids[r * 11 + pos + i]);
    }
    auto logits = model->ForwardStep(tokens, cache);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    pos += step;
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t v = 0; v < vocab; ++v) {
        const double d =
            std::fabs((*logits)[r * vocab + v] - full->logits[(r * 11 + pos - 1) * vocab + v]);
        worst = std::max(worst, d);
        ASSERT_LT(d, 2e-5) << "row " << r << " position " << pos - 1;
      }
    }
  }
  std::printf("[gpt-oss] KV-cache decode vs full forward: max |delta| %.3g\n", worst);
}

TEST(GptOssModel, FastOpsAgreeWithReferenceOps) {
  auto ref = TinyModel("reference");
  auto fast = TinyModel("fast");
  const TokenBatch batch = TinyBatch();
  ASSERT_TRUE(ref->ZeroGrads().ok());
  ASSERT_TRUE(fast->ZeroGrads().ok());
  auto a = ref->Forward(batch);
  auto b = fast->Forward(batch);
  EXPECT_NEAR(a->loss, b->loss, 1e-6 * a->loss);
  ASSERT_TRUE(ref->Backward().ok());
  ASSERT_TRUE(fast->Backward().ok());
  for (size_t i = 0; i < ref->parameters().size(); ++i) {
    EXPECT_LT(RelativeDiff(fast->parameters()[i].grad, ref->parameters()[i].grad), 1e-5)
        << ref->parameters()[i].name;
  }
}

TEST(GptOssModel, Bf16ComputeStaysCloseToFp32) {
  auto f32 = TinyModel("fast", 3);
  auto bf16 = TinyModel("fast", 3, {.compute_dtype = DType::kBF16});
  const TokenBatch batch = TinyBatch();
  ASSERT_TRUE(f32->ZeroGrads().ok());
  ASSERT_TRUE(bf16->ZeroGrads().ok());
  auto a = f32->Forward(batch);
  auto b = bf16->Forward(batch);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
  ASSERT_TRUE(f32->Backward().ok());
  ASSERT_TRUE(bf16->Backward().ok());
  const double loss_err = std::fabs(a->loss - b->loss) / a->loss;
  double worst = 0;
  for (size_t i = 0; i < f32->parameters().size(); ++i) {
    worst = std::max(worst, RelativeDiff(bf16->parameters()[i].grad, f32->parameters()[i].grad));
  }
  std::printf("[gpt-oss bf16 vs fp32] relative loss difference %.3g, worst gradient %.3g\n",
              loss_err, worst);
  EXPECT_LT(loss_err, 2e-2);
  EXPECT_LT(worst, 3e-1);
  EXPECT_GT(loss_err + worst, 0.0);
}

TEST(GptOssModel, NamesUnitsDecayAndHooks) {
  auto model = TinyModel();
  const auto adapter = StateDictAdapterFor(model->config());
  const std::pair<const char*, const char*> names[] = {
      {"layers.1.attention.sinks", "model.layers.1.self_attn.sinks"},
      {"layers.0.attention.wq.bias", "model.layers.0.self_attn.q_proj.bias"},
      {"layers.0.moe.router.weight", "model.layers.0.mlp.router.weight"},
      {"layers.0.moe.experts.mlp1_weight", "model.layers.0.mlp.experts.gate_up_proj"},
      {"layers.0.moe.experts.mlp1_bias", "model.layers.0.mlp.experts.gate_up_proj_bias"},
      {"layers.1.moe.experts.mlp2_weight", "model.layers.1.mlp.experts.down_proj"},
      {"layers.1.moe.experts.mlp2_bias", "model.layers.1.mlp.experts.down_proj_bias"},
      {"layers.1.ffn_norm.weight", "model.layers.1.post_attention_layernorm.weight"},
      {"output.weight", "lm_head.weight"}};
  for (const auto& [mine, hf] : names) {
    ASSERT_NE(model->FindParameter(mine), nullptr) << mine;
    EXPECT_EQ(adapter->ToHf(mine), hf);
    EXPECT_EQ(adapter->FromHf(hf), std::string(mine));
  }
  EXPECT_EQ(model->FindParameter("layers.0.moe.experts.mlp1_weight")->shape, (Shape{4, 32, 32}));
  EXPECT_EQ(model->FindParameter("layers.0.moe.experts.mlp2_weight")->shape, (Shape{4, 16, 32}));
  // transformers' Trainer decay rule: not biases (the experts' 2-D ones too), not norms; sinks do.
  EXPECT_FALSE(model->FindParameter("layers.0.moe.experts.mlp1_bias")->decay);
  EXPECT_FALSE(model->FindParameter("layers.0.moe.router.bias")->decay);
  EXPECT_FALSE(model->FindParameter("layers.0.ffn_norm.weight")->decay);
  EXPECT_TRUE(model->FindParameter("layers.0.attention.sinks")->decay);
  EXPECT_TRUE(model->FindParameter("layers.0.moe.experts.mlp2_weight")->decay);
  ASSERT_EQ(model->units().size(), 3u);
  std::vector<std::string> calls;
  model->set_unit_hooks(
      {.before_forward = [&](int u) { calls.push_back("f" + std::to_string(u)); },
       .after_backward = [&](int u) { calls.push_back("b" + std::to_string(u)); }});
  ASSERT_TRUE(model->ZeroGrads().ok());
  ASSERT_TRUE(model->Forward(TinyBatch()).ok());
  ASSERT_TRUE(model->Backward().ok());
  EXPECT_EQ(calls, (std::vector<std::string>{"f2", "f0", "f1", "b1", "b0", "b2"}));
}

TEST(GptOssModel, SaveLoadRoundTripAndConfigJson) {
  ScratchDir dir;
  auto model = TinyModel("fast", 9);
  ASSERT_TRUE(SaveHfModel(*model, dir.path(), {DType::kF32, 20000}).ok());
  auto config = LoadModelConfig(dir.path());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->arch, Architecture::kGptOss);
  EXPECT_EQ(config->gpt_oss->num_experts, 4);
  EXPECT_EQ(config->layer_sliding_window, (std::vector<int64_t>{4, 0}));
  EXPECT_FALSE(config->gpt_oss->mxfp4_experts);
  auto loaded = LoadHfModel(dir.path(), MakeBackend("reference"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    EXPECT_EQ(MaxAbsDiff(HostTensor(model->parameters()[i].value),
                         HostTensor((*loaded)->parameters()[i].value)),
              0)
        << model->parameters()[i].name;
  }
}

// The MXFP4 fixture (made by transformers): air's experts equal transformers' dequantized
// parameters bit for bit, through the whole-model load and FSDP's unit-at-a-time load.
TEST(GptOssModel, LoadsMxfp4ExpertsAsTransformersDequantizesThem) {
  const std::string dir = testing::GptOssFixture("tiny_mxfp4");
  auto expected = SafetensorsFile::Open(dir + "/expected.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  auto whole = LoadHfModel(dir, MakeBackend("reference"));
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto reader = WeightReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  auto deferred =
      CreateModel((*whole)->config(), MakeBackend("reference"), {.deferred_storage = true});
  ASSERT_TRUE(deferred.ok());
  for (int u = 0; u <= (*deferred)->root_unit(); ++u) {
    ASSERT_TRUE((*deferred)->AllocateUnitStorage(u).ok());
    ASSERT_TRUE(LoadHfUnit(**reader, **deferred, u).ok());
  }
  int compared = 0;
  for (int layer = 0; layer < 2; ++layer) {
    for (const char* which : {"mlp1", "mlp2"}) {
      const std::string mine =
          "layers." + std::to_string(layer) + ".moe.experts." + which + "_weight";
      const std::string hf = "model.layers." + std::to_string(layer) + ".mlp.experts." +
                             (std::string(which) == "mlp1" ? "gate_up_proj" : "down_proj") +
                             ".float32";
      auto want_or = (*expected)->ReadF32(hf);
      ASSERT_TRUE(want_or.ok()) << hf;
      const Tensor& want = *want_or;
      EXPECT_EQ(MaxAbsDiff(HostTensor((*whole)->FindParameter(mine)->value), want), 0.0f) << mine;
      EXPECT_EQ(MaxAbsDiff(HostTensor((*deferred)->FindParameter(mine)->value), want), 0.0f)
          << mine;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 4);
}

TEST(GptOssModel, MissingExpertTensorsAreNamed) {
  ScratchDir dir;
  auto model = TinyModel("fast");
  ASSERT_TRUE(SaveHfModel(*model, dir.path()).ok());
  std::vector<Tensor> host;
  for (const Parameter& p : model->parameters()) host.push_back(HostTensor(p.value));
  const std::vector<std::string> names = HfParameterNames(*model);
  std::vector<NamedTensorRef> refs;
  for (size_t i = 0; i < host.size(); ++i) {
    if (names[i].find("layers.1.mlp.experts.down_proj") == std::string::npos) {
      refs.push_back({names[i], &host[i]});
    }
  }
  ASSERT_TRUE(WriteSafetensors(dir / "model.safetensors", refs, DType::kF32, {}).ok());
  const Status s = LoadHfModel(dir.path(), MakeBackend("reference")).status();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("2 dense expert tensors are missing"),
                                 HasSubstr("model.layers.1.mlp.experts.down_proj"),
                                 HasSubstr("model.layers.1.mlp.experts.down_proj_bias")));
}

TEST(GptOssModel, UnsupportedSettingsAreErrors) {
  ModelConfig c = TinyGptOssConfig();
  GptOssConfig g = *c.gpt_oss;
  g.output_router_logits = true;
  EXPECT_THAT(CreateModel(GptOssModelConfig(g), MakeBackend("fast")).status().message(),
              HasSubstr("output_router_logits"));
  g.output_router_logits = false;
  g.rope.partial_rotary_factor = 0.5;
  EXPECT_THAT(CreateModel(GptOssModelConfig(g), MakeBackend("fast")).status().message(),
              HasSubstr("partial_rotary_factor"));
  auto bad = ParseModelConfig(R"({"model_type": "mixtral", "vocab_size": 8})", "c.json");
  EXPECT_THAT(bad.status().message(), AllOf(HasSubstr("model_type 'mixtral' is not supported"),
                                            HasSubstr("llama, qwen2, qwen3, mistral, gpt_oss")));
}

}  // namespace
}  // namespace air::engine
