// LlamaModel end to end on tiny random models of every architecture: a model-level finite
// difference check, activation checkpointing applied from outside (bit-identical gradients),
// gradient accumulation, KV-cache decoding against the full forward, fast vs reference ops, the
// fused chunked head against the unfused one, bf16 compute against fp32, save/load round trips
// through the state-dict adapter and the load errors (missing tensor, shape mismatch), the FSDP
// units (flat buffers, hooks), frozen parameters, and no allocation in the step loop. Parity with
// transformers itself is in tests/python/test_engine_parity.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/backend/cpu/reference_ops.h"
#include "engine/io/hf_config.h"
#include "engine/io/hf_state_dict.h"
#include "engine/io/state_dict_adapter.h"
#include "engine/model/llama_model.h"
#include "engine/model/lm_head.h"
#include "engine/train/activation_checkpointing.h"
#include "llama_fixture.h"
#include "test_util.h"

namespace air::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Host;
using testing::HostTensor;
using testing::kArchs;
using testing::MakeBackend;
using testing::ScratchDir;
using testing::TinyBatch;
using testing::TinyConfig;
using testing::TinyModel;

class ModelPerArch : public ::testing::TestWithParam<Architecture> {};

std::string ArchName(const ::testing::TestParamInfo<Architecture>& info) {
  return ArchitectureModelType(info.param);
}

TEST_P(ModelPerArch, GradientsMatchFiniteDifferencesOfTheLoss) {
  auto model = TinyModel(GetParam());
  const TokenBatch batch = TinyBatch();
  ASSERT_TRUE(model->ZeroGrads().ok());
  ASSERT_TRUE(model->Forward(batch).ok());
  ASSERT_TRUE(model->Backward().ok());
  const float eps = 2e-3f;
  double checked = 0, worst = 0;
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
      checked += 1;
    }
  }
  EXPECT_GT(checked, 40);
}

TEST_P(ModelPerArch, ActivationCheckpointingGivesBitIdenticalGradients) {
  auto plain = TinyModel(GetParam(), "fast");
  auto ckpt = TinyModel(GetParam(), "fast");
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
    const Parameter& q = ckpt->parameters()[i];
    ASSERT_EQ(p.grad.shape(), q.grad.shape());
    EXPECT_EQ(MaxAbsDiff(HostTensor(p.grad), HostTensor(q.grad)), 0.0f) << p.name;
    EXPECT_GT(L2Norm(HostTensor(p.grad)), 0.0) << p.name << " has no gradient at all";
  }
}

TEST_P(ModelPerArch, KvCacheDecodingMatchesTheFullForward) {
  auto model = TinyModel(GetParam(), "fast");
  TokenBatch batch;
  batch.batch_size = 2;
  batch.seq_len = 11;
  for (int i = 0; i < 22; ++i) batch.input_ids.push_back((i * 17 + 3) % 50);
  auto full = model->Forward(batch, {.training = false, .return_logits = true});
  ASSERT_TRUE(full.ok());
  KvCache cache = std::move(model->NewKvCache(2, 11)).value();
  const int64_t vocab = model->config().vocab_size;
  int64_t pos = 0;
  for (int64_t step : {4, 1, 1, 3, 1, 1}) {
    std::vector<int32_t> tokens;
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t i = 0; i < step; ++i) tokens.push_back(batch.input_ids[r * 11 + pos + i]);
    }
    auto logits = model->ForwardStep(tokens, cache);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    ASSERT_EQ(logits->shape(), (Shape{2, vocab}));
    pos += step;
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t v = 0; v < vocab; ++v) {
        ASSERT_NEAR((*logits)[r * vocab + v], full->logits[(r * 11 + pos - 1) * vocab + v], 2e-5)
            << "row " << r << " position " << pos - 1;
      }
    }
  }
  EXPECT_EQ(cache.length, 11);
  EXPECT_EQ(model->ForwardStep(std::vector<int32_t>{1, 2}, cache).status().code(),
            ErrorCode::kResourceExhausted);
}

TEST_P(ModelPerArch, FastOpsAgreeWithReferenceOps) {
  auto ref = TinyModel(GetParam(), "reference");
  auto fast = TinyModel(GetParam(), "fast");
  const TokenBatch batch = TinyBatch();
  ASSERT_TRUE(ref->ZeroGrads().ok());
  ASSERT_TRUE(fast->ZeroGrads().ok());
  auto a = ref->Forward(batch);
  auto b = fast->Forward(batch);
  EXPECT_NEAR(a->loss, b->loss, 1e-6 * a->loss);
  ASSERT_TRUE(ref->Backward().ok());
  ASSERT_TRUE(fast->Backward().ok());
  for (size_t i = 0; i < ref->parameters().size(); ++i) {
    const Parameter& p = ref->parameters()[i];
    const Parameter& q = fast->parameters()[i];
    const double rel = [&] {
      Tensor d = HostTensor(p.grad);
      for (int64_t j = 0; j < d.numel(); ++j) d[j] -= Host(q.grad)[j];
      return L2Norm(d) / std::max(L2Norm(HostTensor(p.grad)), 1e-20);
    }();
    EXPECT_LT(rel, 1e-5) << p.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, ModelPerArch, ::testing::ValuesIn(kArchs), ArchName);

TEST(Model, GradientAccumulationEqualsTheWholeBatch) {
  auto whole = TinyModel(Architecture::kQwen2, "fast");
  auto parts = TinyModel(Architecture::kQwen2, "fast");
  const TokenBatch batch = TinyBatch();
  ASSERT_TRUE(whole->ZeroGrads().ok());
  ASSERT_TRUE(whole->Forward(batch).ok());
  ASSERT_TRUE(whole->Backward().ok());
  // The same two rows as two micro-batches, each scaled by its share of the loss tokens.
  const int64_t total = batch.CountLossTokens();
  ASSERT_TRUE(parts->ZeroGrads().ok());
  for (int row = 0; row < 2; ++row) {
    TokenBatch micro;
    micro.batch_size = 1;
    micro.seq_len = batch.seq_len;
    auto slice = [&](const std::vector<int32_t>& v) {
      return std::vector<int32_t>(v.begin() + row * batch.seq_len,
                                  v.begin() + (row + 1) * batch.seq_len);
    };
    micro.input_ids = slice(batch.input_ids);
    micro.labels = slice(batch.labels);
    micro.position_ids = slice(batch.position_ids);
    micro.segment_ids = slice(batch.segment_ids);
    const float scale = static_cast<float>(micro.CountLossTokens()) / static_cast<float>(total);
    auto r = parts->Forward(micro, {.loss_scale = scale});
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(parts->Backward().ok());
  }
  for (size_t i = 0; i < whole->parameters().size(); ++i) {
    const Parameter& p = whole->parameters()[i];
    const Parameter& q = parts->parameters()[i];
    for (int64_t j = 0; j < p.grad.numel(); ++j) {
      ASSERT_NEAR(Host(p.grad)[j], Host(q.grad)[j], 1e-6 + 1e-4 * std::fabs(Host(p.grad)[j]))
          << p.name;
    }
  }
}

TEST(Model, ParametersCarryTheModelsNamesAndTheAdapterMapsThemToHf) {
  auto model = TinyModel(Architecture::kQwen3);
  const auto& params = model->parameters();
  EXPECT_EQ(params.front().name, "tok_embeddings.weight");
  EXPECT_EQ(params.back().name, "output.weight");
  const auto adapter = StateDictAdapterFor(model->config());
  for (const Parameter& p : params) {
    const std::string hf = adapter->ToHf(p.name);
    EXPECT_EQ(adapter->FromHf(hf), p.name) << p.name << " -> " << hf;
  }
  EXPECT_EQ(adapter->ToHf("tok_embeddings.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(adapter->ToHf("output.weight"), "lm_head.weight");
  EXPECT_EQ(adapter->ToHf("layers.1.attention.q_norm.weight"),
            "model.layers.1.self_attn.q_norm.weight");
  EXPECT_EQ(adapter->ToHf("layers.0.feed_forward.w1.weight"),
            "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(adapter->ToHf("layers.0.feed_forward.w3.weight"), "model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(adapter->ToHf("layers.0.ffn_norm.weight"),
            "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(adapter->FromHf("model.layers.0.self_attn.rotary_emb.inv_freq"), std::nullopt);
  Parameter* q_norm = model->FindParameter("layers.1.attention.q_norm.weight");
  ASSERT_NE(q_norm, nullptr);
  EXPECT_EQ(q_norm->value.shape(), Shape{12});
  EXPECT_EQ(q_norm->layer, 1);
  EXPECT_FALSE(q_norm->decay);
  Parameter* q = model->FindParameter("layers.0.attention.wq.weight");
  EXPECT_EQ(q->value.shape(), (Shape{48, 32}));
  EXPECT_TRUE(q->decay);
  auto tied = TinyModel(Architecture::kLlama);
  EXPECT_EQ(tied->FindParameter("output.weight"), nullptr);
  EXPECT_NE(tied->FindParameter("layers.0.feed_forward.w2.bias"), nullptr);
  EXPECT_NE(tied->FindParameter("layers.0.attention.wo.bias"), nullptr);
}

TEST(Model, BadBatchesAndCallOrderAreErrors) {
  auto model = TinyModel(Architecture::kQwen2);
  EXPECT_EQ(model->Backward().code(), ErrorCode::kFailedPrecondition);
  TokenBatch b = TinyBatch();
  b.input_ids[10] = 50;
  Status s = model->Forward(b).status();
  EXPECT_THAT(s.message(), AllOf(HasSubstr("input_ids"), HasSubstr("row 1, column 1"),
                                 HasSubstr("50"), HasSubstr("[0, 50)")));
  b = TinyBatch();
  b.labels[3] = -5;
  EXPECT_THAT(model->Forward(b).status().message(), HasSubstr("valid labels are -100"));
  b = TinyBatch();
  b.segment_ids.pop_back();
  EXPECT_THAT(model->Forward(b).status().message(), HasSubstr("segment_ids has 17 values"));
  // An evaluation forward allows no backward.
  ASSERT_TRUE(model->Forward(TinyBatch(), {.training = false}).ok());
  EXPECT_EQ(model->Backward().code(), ErrorCode::kFailedPrecondition);
}

TEST(Model, NoLossTokensGivesZeroLossAndZeroGradients) {
  auto model = TinyModel(Architecture::kMistral);
  TokenBatch b = TinyBatch();
  std::fill(b.labels.begin(), b.labels.end(), kIgnoreIndex);
  ASSERT_TRUE(model->ZeroGrads().ok());
  auto r = model->Forward(b);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->loss, 0.0);
  EXPECT_EQ(r->loss_tokens, 0);
  ASSERT_TRUE(model->Backward().ok());
  for (const Parameter& p : model->parameters())
    EXPECT_EQ(L2Norm(HostTensor(p.grad)), 0.0) << p.name;
}

TEST(Model, PaddingTokenEmbeddingGetsNoGradient) {
  ModelConfig c = TinyConfig(Architecture::kQwen2);
  c.pad_token_id = 0;  // TinyBatch pads with id 0 and also uses it nowhere else
  auto model = std::move(LlamaModel::Create(c, MakeBackend("reference"))).value();
  model->InitWeights(3);
  ASSERT_TRUE(model->ZeroGrads().ok());
  TokenBatch b = TinyBatch();
  b.labels = b.input_ids;  // even with labels on the padding, its embedding row stays frozen
  ASSERT_TRUE(model->Forward(b).ok());
  ASSERT_TRUE(model->Backward().ok());
  const Parameter* embed = model->FindParameter("tok_embeddings.weight");
  for (int64_t j = 0; j < c.hidden_size; ++j) EXPECT_EQ(Host(embed->grad)[j], 0.0f);
  EXPECT_NE(Host(embed->grad)[3 * c.hidden_size], 0.0f);
  // InitWeights zeroes the padding row, as HF does.
  for (int64_t j = 0; j < c.hidden_size; ++j) EXPECT_EQ(Host(embed->value)[j], 0.0f);
}

TEST(Model, UnitHooksRunInOrder) {
  auto model = TinyModel(Architecture::kQwen2, "fast");
  std::vector<std::string> calls;
  auto record = [&](const char* what) {
    return [&calls, what](int unit) { calls.push_back(what + std::to_string(unit)); };
  };
  model->set_unit_hooks({record("f"), record("F"), record("b"), record("a")});
  ASSERT_TRUE(model->ZeroGrads().ok());
  ASSERT_TRUE(model->Forward(TinyBatch()).ok());
  ASSERT_TRUE(model->Backward().ok());
  // Unit 2 is the root (embedding, final norm, head): it brackets both passes.
  EXPECT_EQ(calls, (std::vector<std::string>{"f2", "f0", "F0", "f1", "F1", "F2", "b2", "b1", "a1",
                                             "b0", "a0", "a2"}));
}

TEST(Model, ParametersAreViewsIntoOneFlatBufferPerUnit) {
  auto model = TinyModel(Architecture::kQwen3, "fast");
  ASSERT_TRUE(model->ZeroGrads().ok());
  const auto& units = model->units();
  ASSERT_EQ(units.size(), 3u);  // two layers + root
  EXPECT_EQ(units[0].name, "layers.0");
  EXPECT_EQ(units[model->root_unit()].name, "root");
  int64_t total = 0;
  for (const ParamGroup& g : units) {
    size_t offset = 0;
    for (const Parameter* p : g.params) {
      // Contiguous, in order, inside the unit's one value buffer and one gradient buffer.
      EXPECT_EQ(p->value.buffer(), g.values.get()) << p->name;
      EXPECT_EQ(p->value.byte_offset(), offset) << p->name;
      EXPECT_EQ(p->grad.buffer(), g.grads.get()) << p->name;
      EXPECT_EQ(p->grad.byte_offset(), offset) << p->name;
      offset += p->value.bytes();
    }
    EXPECT_EQ(offset, g.values->bytes());
    EXPECT_EQ(g.numel, g.trainable_numel);
    total += g.numel;
  }
  EXPECT_EQ(total, model->NumParameters());
  EXPECT_EQ(model->FindParameter("layers.1.feed_forward.w3.weight")->unit, 1);
  EXPECT_EQ(model->FindParameter("norm.weight")->unit, model->root_unit());
  EXPECT_EQ(model->FindParameter("output.weight")->unit, model->root_unit());
}

TEST(Model, FrozenParametersGetNoGradientNoGemmAndNoOptimizerState) {
  // Freezing leaves every other gradient bit-identical, gives the frozen ones no gradient
  // memory, and shrinks the unit's gradient buffer by exactly their size.
  auto all = TinyModel(Architecture::kLlama, "fast");
  auto frozen = TinyModel(Architecture::kLlama, "fast");
  const std::vector<std::string> names = {
      "layers.0.attention.wq.weight",    "layers.0.attention.wq.bias",
      "layers.1.feed_forward.w2.weight", "layers.1.attention_norm.weight",
      "tok_embeddings.weight",           "norm.weight"};
  int64_t frozen_numel = 0;
  for (const std::string& name : names) {
    ASSERT_TRUE(frozen->SetTrainable(name, false).ok()) << name;
    frozen_numel += frozen->FindParameter(name)->numel();
  }
  EXPECT_EQ(frozen->SetTrainable("no.such.weight", false).code(), ErrorCode::kNotFound);
  ASSERT_TRUE(all->ZeroGrads().ok());
  ASSERT_TRUE(frozen->ZeroGrads().ok());
  EXPECT_EQ(frozen->NumTrainableParameters(), all->NumParameters() - frozen_numel);
  int64_t grad_numel = 0;
  for (const ParamGroup& g : frozen->units()) grad_numel += g.trainable_numel;
  EXPECT_EQ(grad_numel, frozen->NumTrainableParameters());
  const TokenBatch batch = TinyBatch();
  for (auto* m : {all.get(), frozen.get()}) {
    ASSERT_TRUE(m->Forward(batch).ok());
    ASSERT_TRUE(m->Backward().ok());
  }
  for (size_t i = 0; i < all->parameters().size(); ++i) {
    const Parameter& p = all->parameters()[i];
    const Parameter& q = frozen->parameters()[i];
    if (!q.trainable) {
      EXPECT_TRUE(q.grad.empty()) << q.name;
      continue;
    }
    EXPECT_EQ(MaxAbsDiff(HostTensor(p.grad), HostTensor(q.grad)), 0.0f) << p.name;
  }
  // Unfreezing lays the gradient buffer out again with room for it.
  ASSERT_TRUE(frozen->SetTrainable("norm.weight", true).ok());
  ASSERT_TRUE(frozen->ZeroGrads().ok());
  EXPECT_FALSE(frozen->FindParameter("norm.weight")->grad.empty());
}

// A reference backend that counts its allocations.
class CountingBackend : public ReferenceOps {
 public:
  Result<std::unique_ptr<Buffer>> Allocate(size_t bytes) const override {
    ++allocations;
    return ReferenceOps::Allocate(bytes);
  }
  mutable int allocations = 0;
};

// A reference backend that counts its GEMMs' multiply-adds.
class GemmCountingBackend : public ReferenceOps {
 public:
  void GemmKernel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const View& a,
                  int64_t lda, const View& b, int64_t ldb, float beta, const View& c,
                  int64_t ldc) const override {
    multiply_adds += m * n * k;
    ReferenceOps::GemmKernel(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
  }
  mutable int64_t multiply_adds = 0;
};

// With the embeddings frozen nothing reads dL/d(layer 0's input): the backward skips the
// attention's input-gradient products there (as PyTorch's autograd does) and every gradient it
// does compute keeps its bits. Layer 0's input norm is frozen in both runs (its own gradient
// would need those products).
TEST(Model, FrozenEmbeddingsSkipLayerZerosAttentionInputGradient) {
  for (Architecture arch : {Architecture::kQwen2, Architecture::kQwen3}) {
    auto run = [&](bool embeddings_trainable, int64_t* multiply_adds) {
      auto backend = std::make_shared<GemmCountingBackend>();
      auto model = std::move(LlamaModel::Create(TinyConfig(arch), backend)).value();
      model->InitWeights(3);
      EXPECT_TRUE(model->SetTrainable("tok_embeddings.weight", embeddings_trainable).ok());
      EXPECT_TRUE(model->SetTrainable("layers.0.attention_norm.weight", false).ok());
      EXPECT_TRUE(model->ZeroGrads().ok());
      EXPECT_TRUE(model->Forward(TinyBatch()).ok());
      backend->multiply_adds = 0;
      EXPECT_TRUE(model->Backward().ok());
      *multiply_adds = backend->multiply_adds;
      std::map<std::string, std::vector<float>> grads;
      for (const Parameter& p : model->parameters()) {
        if (p.trainable && p.name != "tok_embeddings.weight") {
          const auto g = Host(p.grad);
          grads[p.name].assign(g.begin(), g.end());
        }
      }
      return grads;
    };
    int64_t skipped = 0, full = 0;
    const auto frozen = run(false, &skipped);
    const auto trainable = run(true, &full);
    EXPECT_EQ(frozen, trainable) << ArchitectureModelType(arch);
    const ModelConfig c = TinyConfig(arch);
    const int64_t rows = 2 * 9;  // TinyBatch
    EXPECT_EQ(full - skipped, rows * c.hidden_size * (c.q_dim() + 2 * c.kv_dim()))
        << ArchitectureModelType(arch);
  }
}

TEST(Model, TheStepLoopAllocatesNothingAfterItsFirstStep) {
  auto backend = std::make_shared<CountingBackend>();
  for (bool checkpointing : {false, true}) {
    auto model = std::move(LlamaModel::Create(TinyConfig(Architecture::kQwen3), backend)).value();
    train::ApplyActivationCheckpointing(*model, checkpointing);
    model->InitWeights(2);
    auto step = [&] {
      ASSERT_TRUE(model->ZeroGrads().ok());
      ASSERT_TRUE(model->Forward(TinyBatch()).ok());
      ASSERT_TRUE(model->Backward().ok());
    };
    step();
    const int after_first = backend->allocations;
    for (int i = 0; i < 3; ++i) step();
    EXPECT_EQ(backend->allocations, after_first) << "checkpointing " << checkpointing;
  }
}

TEST(Model, SaveAndFromPretrainedRoundTripSingleAndSharded) {
  for (uint64_t shard : {uint64_t{0}, uint64_t{20000}}) {
    ScratchDir dir;
    auto model = TinyModel(Architecture::kQwen3, "fast", 9);
    ASSERT_TRUE(SaveHfModel(*model, dir.path(), {DType::kF32, shard}).ok());
    EXPECT_EQ(std::filesystem::exists(dir / "model.safetensors.index.json"), shard > 0);
    auto loaded = LoadHfModel(dir.path(), MakeBackend("reference"));
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    for (size_t i = 0; i < model->parameters().size(); ++i) {
      EXPECT_EQ(MaxAbsDiff(HostTensor(model->parameters()[i].value),
                           HostTensor((*loaded)->parameters()[i].value)),
                0)
          << model->parameters()[i].name;
    }
    // Saving again in the other layout leaves no stale weight files behind.
    ASSERT_TRUE(
        SaveHfModel(*model, dir.path(), {DType::kF32, shard > 0 ? 0 : uint64_t{20000}}).ok());
    EXPECT_EQ(std::filesystem::exists(dir / "model.safetensors.index.json"), shard == 0);
    EXPECT_EQ(std::filesystem::exists(dir / "model.safetensors"), shard > 0);
    EXPECT_TRUE(LoadHfModel(dir.path(), MakeBackend("reference")).ok());
  }
}

// FSDP's unit-at-a-time load: a deferred model has no storage until AllocateUnitStorage, and
// LoadHfUnit fills exactly one unit (bf16 file: decoded as by the whole-model load; the mapped
// pages each read drops are mapped again by a second read of the same file).
TEST(Model, DeferredStorageLoadsOneUnitAtATime) {
  ScratchDir dir;
  auto model = TinyModel(Architecture::kQwen3, "fast", 9);
  ASSERT_TRUE(SaveHfModel(*model, dir.path(), {DType::kBF16, 0}).ok());
  auto whole = LoadHfModel(dir.path(), MakeBackend("reference"));
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto reader = WeightReader::Open(dir.path());
  ASSERT_TRUE(reader.ok());
  auto deferred =
      LlamaModel::Create((*whole)->config(), MakeBackend("reference"), {.deferred_storage = true});
  ASSERT_TRUE(deferred.ok());
  LlamaModel& m = **deferred;
  for (const ParamGroup& g : m.units()) EXPECT_TRUE(g.values == nullptr) << g.name;
  Status unloaded = LoadHfUnit(**reader, m, 0);
  EXPECT_EQ(unloaded.code(), ErrorCode::kFailedPrecondition) << unloaded.ToString();
  for (int u = 0; u <= m.root_unit(); ++u) {
    ASSERT_TRUE(m.AllocateUnitStorage(u).ok());
    ASSERT_TRUE(LoadHfUnit(**reader, m, u).ok());
    for (const ParamGroup& g : m.units()) {
      const int index = static_cast<int>(&g - m.units().data());
      EXPECT_EQ(g.values != nullptr, index <= u) << g.name << " after loading unit " << u;
    }
  }
  EXPECT_EQ(m.AllocateUnitStorage(0).code(), ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(LoadHfUnit(**reader, m, 0).ok());  // pages the first read dropped come back
  for (size_t i = 0; i < m.parameters().size(); ++i) {
    EXPECT_EQ(MaxAbsDiff(HostTensor(m.parameters()[i].value),
                         HostTensor((*whole)->parameters()[i].value)),
              0)
        << m.parameters()[i].name;
  }
}

TEST(Model, LoadErrorsNameTensorFileAndShapes) {
  ScratchDir dir;
  auto model = TinyModel(Architecture::kQwen2, "fast");
  ASSERT_TRUE(SaveHfModel(*model, dir.path()).ok());
  // Rewrite the weights without one tensor, then with one of the wrong shape.
  std::vector<Tensor> host;
  for (const Parameter& p : model->parameters()) host.push_back(HostTensor(p.value));
  std::vector<NamedTensorRef> refs;
  const std::vector<std::string> names = HfParameterNames(*model);
  for (size_t i = 0; i < host.size(); ++i) {
    if (names[i] != "model.layers.1.self_attn.k_proj.bias") refs.push_back({names[i], &host[i]});
  }
  const std::string file = dir / "model.safetensors";
  ASSERT_TRUE(WriteSafetensors(file, refs, DType::kF32, {}).ok());
  Status missing = LoadHfModel(dir.path(), MakeBackend("reference")).status();
  EXPECT_EQ(missing.code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.message(), AllOf(HasSubstr("'model.layers.1.self_attn.k_proj.bias'"),
                                       HasSubstr(file), HasSubstr("[16]")));
  Tensor wrong({16, 2});
  refs.push_back({"model.layers.1.self_attn.k_proj.bias", &wrong});
  ASSERT_TRUE(WriteSafetensors(file, refs, DType::kF32, {}).ok());
  Status mismatch = LoadHfModel(dir.path(), MakeBackend("reference")).status();
  EXPECT_THAT(mismatch.message(),
              AllOf(HasSubstr("'model.layers.1.self_attn.k_proj.bias'"), HasSubstr(file),
                    HasSubstr("[16, 2]"), HasSubstr("expects [16]")));
  std::filesystem::remove(file);
  EXPECT_THAT(LoadHfModel(dir.path(), MakeBackend("reference")).status().message(),
              HasSubstr("no model weights in"));
}

TEST(Model, ShardIndexErrorsNameTheIndex) {
  ScratchDir dir;
  auto model = TinyModel(Architecture::kQwen2, "fast");
  ASSERT_TRUE(SaveHfModel(*model, dir.path(), {DType::kF32, 20000}).ok());
  const std::string index = dir / "model.safetensors.index.json";
  std::string text = testing::ReadBytes(index);
  const std::string shard1 = "model-00001-of-";
  testing::WriteBytes(
      index, std::string(text).replace(text.find(shard1), shard1.size(), "model-00009-of-"));
  Status s = WeightReader::Open(dir.path()).status();
  EXPECT_THAT(s.message(), AllOf(HasSubstr("model-00009-of-"), HasSubstr(index)));
  testing::WriteBytes(index, "{\"weight_map\": 3}");
  EXPECT_THAT(WeightReader::Open(dir.path()).status().message(),
              AllOf(HasSubstr(index), HasSubstr("weight_map")));
}

// The fused, chunked head (lm_head.h) gives what the unfused (N, V) product gives: the same loss
// sums and gradients up to the GEMM's blocking over rows. HeadChunkRows is at least 64 rows, so a
// vocabulary large enough that a 128 MiB chunk holds fewer rows than the batch shows the
// chunking: 1.2M logits a row cut a 300-row batch into chunks of 64 (5 chunks).
// The fused head (5 chunks of 64 rows) against the unfused one (one product of all 300 rows), in
// fp32 and in bf16 compute, where dlogits go to a bf16 chunk of their own (lm_head.h): the same
// loss, and gradients apart from the summation order of the head's products. The measured
// differences are printed; the bounds are about 10x them.
TEST(Model, FusedChunkedHeadEqualsTheUnfusedHead) {
  EXPECT_EQ(HeadChunkRows(300, 1200000), 64);
  EXPECT_EQ(HeadChunkRows(300, 32000), 300);
  EXPECT_EQ(HeadChunkRows(8192, 128256), 261);
  // No head gradient (a frozen head, evaluation): ~4 MiB chunks, still at least 64 rows.
  EXPECT_EQ(HeadChunkRows(1024, 4096, false), 256);
  EXPECT_EQ(HeadChunkRows(8192, 128256, false), 64);
  EXPECT_EQ(HeadChunkRows(100, 4096, false), 100);
  struct Case {
    DType compute;
    double loss_bound, grad_bound;
    bool frozen_head = false;  // LoRA's: no head gradient, the ~4 MiB chunks (still 64 rows)
    int64_t vocab = 1200000;   // 5 chunks of 64 rows for 300 tokens
    int64_t hidden = 16;
  };
  // The last case: a frozen head of 16384 x 32 (4 MiB of logits: 64-row chunks), whose weight
  // the fast backend packs once for the pass in both layouts (lm_head.h's packed views: the
  // first cases' 16-wide input gradient is a product it packs none for).
  for (const Case& k :
       {Case{DType::kF32, 1e-6, 3e-6}, Case{DType::kBF16, 1e-6, 3e-6},
        Case{DType::kBF16, 1e-6, 3e-6, true}, Case{DType::kBF16, 1e-6, 3e-6, true, 16384, 32}}) {
    SCOPED_TRACE(std::string(DTypeName(k.compute)) + (k.frozen_head ? " frozen head" : "") +
                 " vocab " + std::to_string(k.vocab));
    ModelConfig c = TinyConfig(Architecture::kQwen2);
    c.vocab_size = k.vocab;
    c.hidden_size = k.hidden;
    c.intermediate_size = 16;
    c.num_layers = 1;
    c.num_heads = 2;
    c.num_kv_heads = 1;
    c.layer_sliding_window.assign(1, 0);
    TokenBatch b;
    b.batch_size = 3;
    b.seq_len = 100;
    for (int i = 0; i < 300; ++i) {
      b.input_ids.push_back(static_cast<int32_t>((i * 7919) % k.vocab));
    }
    b.labels = b.input_ids;
    b.labels[17] = kIgnoreIndex;
    const ModelOptions options{.compute_dtype = k.compute};
    auto fused = std::move(LlamaModel::Create(c, MakeBackend("fast"), options)).value();
    auto unfused = std::move(LlamaModel::Create(c, MakeBackend("fast"), options)).value();
    fused->InitWeights(4);
    unfused->InitWeights(4);
    if (k.frozen_head) {
      ASSERT_TRUE(fused->SetTrainable("output.weight", false).ok());
      ASSERT_TRUE(unfused->SetTrainable("output.weight", false).ok());
    }
    ASSERT_TRUE(fused->ZeroGrads().ok());
    ASSERT_TRUE(unfused->ZeroGrads().ok());
    auto a = fused->Forward(b);
    auto u = unfused->Forward(b, {.unfused_head = true});
    ASSERT_TRUE(a.ok() && u.ok());
    const double loss_err = std::fabs(a->loss - u->loss) / u->loss;
    std::printf("[fused head %s] relative loss difference %.3g\n", DTypeName(k.compute), loss_err);
    EXPECT_LT(loss_err, k.loss_bound);
    ASSERT_TRUE(fused->Backward().ok());
    ASSERT_TRUE(unfused->Backward().ok());
    double worst = 0.0;
    for (size_t i = 0; i < fused->parameters().size(); ++i) {
      if (fused->parameters()[i].grad.empty()) continue;  // frozen
      Tensor d = HostTensor(fused->parameters()[i].grad);
      const Tensor gu = HostTensor(unfused->parameters()[i].grad);
      for (int64_t j = 0; j < d.numel(); ++j) d[j] -= gu[j];
      const double err = L2Norm(d) / std::max(L2Norm(gu), 1e-30);
      worst = std::max(worst, err);
    }
    std::printf("[fused head %s] worst relative gradient difference %.3g\n", DTypeName(k.compute),
                worst);
    EXPECT_LT(worst, k.grad_bound);
  }
}

// A model computing in bf16 (bf16 activations, weights rounded to bf16 in every product, fp32
// norms, softmax and loss) against the same model in fp32: the loss and the gradients agree to
// bf16's precision. The measured differences are printed; the bounds are about 10x them.
TEST(Model, Bf16ComputeStaysCloseToFp32) {
  for (const char* ops : {"reference", "fast"}) {
    auto f32 = TinyModel(Architecture::kQwen2, ops, 3);
    auto bf16 = TinyModel(Architecture::kQwen2, ops, 3, {.compute_dtype = DType::kBF16});
    const TokenBatch batch = TinyBatch();
    ASSERT_TRUE(f32->ZeroGrads().ok());
    ASSERT_TRUE(bf16->ZeroGrads().ok());
    auto a = f32->Forward(batch);
    auto b = bf16->Forward(batch);
    ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
    const double loss_err = std::fabs(a->loss - b->loss) / a->loss;
    ASSERT_TRUE(f32->Backward().ok());
    ASSERT_TRUE(bf16->Backward().ok());
    double worst = 0.0;
    for (size_t i = 0; i < f32->parameters().size(); ++i) {
      const Tensor ga = HostTensor(f32->parameters()[i].grad);
      Tensor d = HostTensor(bf16->parameters()[i].grad);
      for (int64_t j = 0; j < d.numel(); ++j) d[j] -= ga[j];
      worst = std::max(worst, L2Norm(d) / std::max(L2Norm(ga), 1e-20));
    }
    std::printf(
        "[bf16 vs fp32, %s] relative loss difference %.3g, worst relative gradient "
        "difference %.3g\n",
        ops, loss_err, worst);
    EXPECT_LT(loss_err, 2e-2) << ops;
    EXPECT_LT(worst, 3e-1) << ops;
    EXPECT_GT(loss_err + worst, 0.0) << ops << ": bf16 did not change anything";
  }
}

TEST(Model, AComputeDtypeWithoutKernelsIsAnError) {
  auto f16 = LlamaModel::Create(TinyConfig(Architecture::kQwen2), MakeBackend("fast"),
                                {.compute_dtype = DType::kF16});
  EXPECT_EQ(f16.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(f16.status().message(), HasSubstr("F32 or BF16, not F16"));
}

}  // namespace
}  // namespace air::engine
