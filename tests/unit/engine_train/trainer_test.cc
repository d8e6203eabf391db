// Tests of the training loop on a real (tiny, random-initialized) Llama model:
//  - the loss normalization: two micro-batches accumulated with scales n_i / N give the gradient
//    of one batch holding both (the mean over all loss tokens);
//  - the Trainer with gradient accumulation 2 x batch 1 equals accumulation 1 x batch 2 (same
//    loss, same gradient norm, same weights);
//  - determinism by seed, activation checkpointing not changing results, checkpoints written at
//    save_steps, metrics.jsonl lines, and learning (the loss falls on a repeated batch).
#include "engine/train/trainer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/backend/registry.h"
#include "engine/io/hf_state_dict.h"
#include "engine/model/llama_model.h"
#include "engine/parallel/process_group.h"
#include "engine/train/pretokenized_dataset.h"
#include "unit/engine_train/tiny_llama.h"

namespace air::engine::train {
namespace {

namespace fs = std::filesystem;

constexpr int kVocab = air::testing::kTinyLlamaVocab;

std::unique_ptr<LlamaModel> TinyModel(uint64_t seed = 5) { return air::testing::TinyLlama(seed); }

std::vector<TokenizedExample> Examples() {
  // Different lengths and prompt masks so that micro-batches hold different loss-token counts.
  std::vector<TokenizedExample> out;
  uint32_t x = 17;
  for (int i = 0; i < 6; ++i) {
    TokenizedExample ex;
    const int len = 5 + 3 * i;
    for (int t = 0; t < len; ++t) {
      x = x * 1103515245u + 12345u;
      ex.input_ids.push_back(static_cast<int32_t>((x >> 16) % kVocab));
    }
    ex.labels = ex.input_ids;
    for (int t = 0; t < i % 3 + 1; ++t) ex.labels[t] = kIgnoreIndex;
    ex.source = "example " + std::to_string(i);
    out.push_back(ex);
  }
  return out;
}

DataLoaderOptions Unshuffled(int batch_size) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.seq_len = 64;
  o.packing = false;
  o.group_by_length = false;
  o.shuffle = false;
  return o;
}

// One right-padded batch holding exactly the given examples, in order.
TokenBatch BatchOf(const std::vector<TokenizedExample>& examples) {
  auto loader = DataLoader::Create(examples, 0, Unshuffled(static_cast<int>(examples.size())));
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  return loader->Next();
}

std::vector<Tensor> Grads(LlamaModel& model) {
  std::vector<Tensor> grads;
  for (const Parameter& p : model.parameters()) {
    grads.push_back(model.backend().ToHostTensor(p.grad));
  }
  return grads;
}

double RelativeDiff(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    num += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    den += b[i] * static_cast<double>(b[i]);
  }
  return std::sqrt(num) / std::max(1e-30, std::sqrt(den));
}

TEST(LossNormalizationTest, AccumulatedMicroBatchesEqualOneBatchOfBoth) {
  auto examples = Examples();
  TokenBatch first = BatchOf({examples[0], examples[1]});
  TokenBatch second = BatchOf({examples[4], examples[5]});
  TokenBatch both = BatchOf({examples[0], examples[1], examples[4], examples[5]});
  const int64_t n1 = first.CountLossTokens(), n2 = second.CountLossTokens();
  ASSERT_NE(n1, n2);  // equal counts would hide a 1/G normalization bug
  ASSERT_EQ(both.CountLossTokens(), n1 + n2);

  auto model = TinyModel();
  ASSERT_TRUE(model->ZeroGrads().ok());
  auto r1 = model->Forward(first, {.loss_scale = static_cast<float>(double(n1) / double(n1 + n2))});
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ASSERT_TRUE(model->Backward().ok());
  auto r2 =
      model->Forward(second, {.loss_scale = static_cast<float>(double(n2) / double(n1 + n2))});
  ASSERT_TRUE(r2.ok());
  ASSERT_TRUE(model->Backward().ok());
  std::vector<Tensor> accumulated = Grads(*model);
  const double accumulated_loss = (r1->loss_sum + r2->loss_sum) / double(n1 + n2);

  ASSERT_TRUE(model->ZeroGrads().ok());
  auto r = model->Forward(both);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(model->Backward().ok());
  std::vector<Tensor> single = Grads(*model);

  EXPECT_NEAR(accumulated_loss, r->loss, 1e-6 * r->loss);
  for (size_t i = 0; i < single.size(); ++i) {
    EXPECT_LT(RelativeDiff(accumulated[i], single[i]), 1e-5) << model->parameters()[i].name;
  }
}

struct RunResult {
  std::vector<nlohmann::json> metrics;
  std::vector<Tensor> weights;
  fs::path dir;
};

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("air_trainer_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  TrainConfig BaseConfig(const std::string& name) {
    TrainConfig c;
    c.model_name = "tiny";
    c.dataset_name = "examples";
    c.output_dir = (root_ / name).string();
    c.max_seq_len = 64;
    c.learning_rate = 1e-2;
    c.max_steps = 3;
    c.lr_scheduler_type = LrSchedulerType::kCosine;
    c.warmup_steps = 1;
    c.weight_decay = 0.05;
    c.max_grad_norm = 1.0;
    c.logging_steps = 1;
    return c;
  }

  RunResult Train(const TrainConfig& config, std::vector<TokenizedExample> examples) {
    auto model = TinyModel();
    DataLoaderOptions options;
    options.batch_size = config.per_device_batch_size;
    options.seq_len = config.max_seq_len;
    options.packing = config.packing;
    options.group_by_length = false;  // so batch 2 holds the rows of two batches of 1
    options.seed = static_cast<uint64_t>(config.seed);
    auto loader = DataLoader::Create(std::move(examples), 0, options);
    EXPECT_TRUE(loader.ok()) << loader.status().ToString();
    // One process: FSDP over a group of one, the path `air train` takes.
    auto group = parallel::SingleProcessGroup();
    parallel::CommThread comm;
    auto sharded = fsdp::Fsdp::Apply(*model, *group, comm, {.precision = config.precision});
    EXPECT_TRUE(sharded.ok()) << sharded.status().ToString();
    TrainerIo io;
    io.env = DefaultEnv();
    io.parallel = {.group = group.get(), .comm = &comm, .fsdp = sharded->get()};
    Trainer trainer(model.get(), config, io);
    auto summary = trainer.Run(*loader);
    EXPECT_TRUE(summary.ok()) << summary.status().ToString();
    RunResult result;
    result.dir = config.output_dir;
    auto text = DefaultEnv()->ReadFile(config.output_dir + "/metrics.jsonl");
    EXPECT_TRUE(text.ok());
    std::istringstream lines(text.ok() ? *text : "");
    for (std::string line; std::getline(lines, line);) {
      result.metrics.push_back(nlohmann::json::parse(line));
    }
    auto full = (*sharded)->GatherFullParameters();  // the fp32 master weights
    EXPECT_TRUE(full.ok());
    result.weights = std::move(*full);
    return result;
  }

  fs::path root_;
};

TEST_F(TrainerTest, AccumulationOfTwoEqualsOneBatchOfTwo) {
  TrainConfig accumulated = BaseConfig("accumulated");
  accumulated.per_device_batch_size = 1;
  accumulated.gradient_accumulation_steps = 2;
  TrainConfig batched = BaseConfig("batched");
  batched.per_device_batch_size = 2;
  batched.gradient_accumulation_steps = 1;
  RunResult a = Train(accumulated, Examples());
  RunResult b = Train(batched, Examples());
  ASSERT_EQ(a.metrics.size(), 3u);
  ASSERT_EQ(b.metrics.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    const double la = a.metrics[s]["loss"], lb = b.metrics[s]["loss"];
    const double ga = a.metrics[s]["grad_norm"], gb = b.metrics[s]["grad_norm"];
    EXPECT_NEAR(la, lb, 1e-5 * lb) << "step " << s + 1;
    EXPECT_NEAR(ga, gb, 1e-4 * gb) << "step " << s + 1;
  }
  for (size_t i = 0; i < a.weights.size(); ++i) {
    EXPECT_LT(MaxAbsDiff(a.weights[i], b.weights[i]), 1e-5) << i;
  }
}

TEST_F(TrainerTest, SameSeedSameWeightsAndCheckpointingChangesNothing) {
  TrainConfig plain = BaseConfig("plain");
  TrainConfig again = BaseConfig("again");
  TrainConfig checkpointed = BaseConfig("checkpointed");
  checkpointed.activation_checkpointing = true;
  RunResult a = Train(plain, Examples());
  RunResult b = Train(again, Examples());
  RunResult c = Train(checkpointed, Examples());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    EXPECT_EQ(MaxAbsDiff(a.weights[i], b.weights[i]), 0.0f) << i;
    EXPECT_EQ(MaxAbsDiff(a.weights[i], c.weights[i]), 0.0f) << i;
  }
  // A different data seed gives a different order, hence different weights.
  TrainConfig other = BaseConfig("other");
  other.seed = 99;
  RunResult d = Train(other, Examples());
  float max_diff = 0;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    max_diff = std::max(max_diff, MaxAbsDiff(a.weights[i], d.weights[i]));
  }
  EXPECT_GT(max_diff, 0.0f);
}

TEST_F(TrainerTest, WritesMetricsAndCheckpoints) {
  TrainConfig c = BaseConfig("out");
  c.max_steps = 4;
  c.save_steps = 2;
  c.logging_steps = 3;
  RunResult r = Train(c, Examples());
  // logging_steps 3 over 4 steps: lines for steps 3 and 4 (the last step is always logged).
  ASSERT_EQ(r.metrics.size(), 2u);
  EXPECT_EQ(r.metrics[0]["step"], 3);
  EXPECT_EQ(r.metrics[1]["step"], 4);
  for (const char* key : {"loss", "lr", "grad_norm", "tokens", "tokens_per_s", "elapsed_s"}) {
    EXPECT_TRUE(r.metrics[0].contains(key)) << key;
  }
  EXPECT_GT(r.metrics[1]["tokens"].get<int64_t>(), r.metrics[0]["tokens"].get<int64_t>());
  for (const char* dir : {"checkpoint-2", "checkpoint-4", "."}) {
    EXPECT_TRUE(fs::exists(r.dir / dir / "config.json")) << dir;
    EXPECT_TRUE(fs::exists(r.dir / dir / "model.safetensors")) << dir;
    EXPECT_TRUE(fs::exists(r.dir / dir / "generation_config.json")) << dir;
  }
  // A saved checkpoint loads back into the weights the run ended with.
  auto loaded = LoadHfModel(r.dir.string(), *CreateBackend({.kind = "reference"}));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  for (size_t i = 0; i < r.weights.size(); ++i) {
    EXPECT_EQ(MaxAbsDiff((*loaded)->backend().ToHostTensor((*loaded)->parameters()[i].value),
                         r.weights[i]),
              0.0f);
  }
}

TEST_F(TrainerTest, LossFallsOnRepeatedData) {
  TrainConfig c = BaseConfig("learn");
  c.max_steps = 30;
  c.per_device_batch_size = 6;
  c.lr_scheduler_type = LrSchedulerType::kConstant;
  c.warmup_steps = 0;
  c.logging_steps = 1;
  RunResult r = Train(c, Examples());
  ASSERT_EQ(r.metrics.size(), 30u);
  const double first = r.metrics.front()["loss"], last = r.metrics.back()["loss"];
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
}

TEST(TotalStepsTest, EpochsAndMaxSteps) {
  TrainConfig c;
  c.num_train_epochs = 1.0;
  EXPECT_EQ(TotalSteps(c, 3), 3);
  c.num_train_epochs = 2.5;
  EXPECT_EQ(TotalSteps(c, 4), 10);
  EXPECT_EQ(TotalSteps(c, 1), 3);  // ceil(2.5)
  c.num_train_epochs = 1e300;      // clamped, not an out-of-range conversion (was INT_MIN)
  EXPECT_EQ(TotalSteps(c, 8), kMaxTotalSteps);
  c.max_steps = 5;
  EXPECT_EQ(TotalSteps(c, 1000), 5);
}

DataLoader LoaderOf(int examples, int batch, int world, int accumulation) {
  std::vector<TokenizedExample> data(static_cast<size_t>(examples));
  for (auto& ex : data) ex.input_ids = ex.labels = {1, 2, 3};
  DataLoaderOptions o;
  o.packing = false;
  o.batch_size = batch;
  o.world_size = world;
  o.micro_batches_per_step = accumulation;
  return std::move(DataLoader::Create(std::move(data), 0, o)).value();
}

TEST(TotalStepsTest, StepsPerEpochCountAsTransformersOrByTheGlobalBatch) {
  TrainConfig c;
  c.gradient_accumulation_steps = 2;
  // 14 rows, batch 1 x 1 rank: transformers has 14 micro-batches, floor(14 / 2) = 7 steps.
  EXPECT_EQ(StepsPerEpoch(c, LoaderOf(14, 1, 1, 2)), 7);
  // 15 rows: its Trainer also ends the epoch with a step of 1 micro-batch it does not count.
  EXPECT_EQ(StepsPerEpoch(c, LoaderOf(15, 1, 1, 2)), 7);
  c.gradient_accumulation_steps = 25;  // more than an epoch: at least one step
  EXPECT_EQ(StepsPerEpoch(c, LoaderOf(10, 1, 1, 25)), 1);
  // With global_batch_size every step of the epoch counts, the same for any split of it.
  c.global_batch_size = 4;
  c.gradient_accumulation_steps = 2;
  EXPECT_EQ(StepsPerEpoch(c, LoaderOf(15, 1, 2, 2)), 4);  // ceil(15 / 4)
  c.gradient_accumulation_steps = 4;
  EXPECT_EQ(StepsPerEpoch(c, LoaderOf(15, 1, 1, 4)), 4);
  c.gradient_accumulation_steps = 1;
  EXPECT_EQ(StepsPerEpoch(c, LoaderOf(15, 2, 2, 1)), 4);
}

}  // namespace
}  // namespace air::engine::train
