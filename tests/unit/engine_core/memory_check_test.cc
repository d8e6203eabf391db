// Tests for the memory check before a model is allocated (model/memory_check.h): the parameter
// count it computes without building the model equals the built model's for every
// architecture, MemAvailable is read, and a model far beyond it is refused with the figures.
#include "engine/model/memory_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/model/llama_model.h"
#include "test_util.h"

namespace air::engine {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ModelConfig Config(Architecture arch, int64_t layers, bool tied) {
  ModelConfig c;
  c.arch = arch;
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = layers;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.qk_norm = arch == Architecture::kQwen3;
  c.layer_sliding_window.assign(static_cast<size_t>(layers), 0);
  c.attention_bias = arch == Architecture::kLlama;
  c.mlp_bias = arch == Architecture::kLlama;
  c.tie_word_embeddings = tied;
  return c;
}

TEST(MemoryCheckTest, ParameterCountMatchesTheBuiltModel) {
  for (Architecture arch :
       {Architecture::kLlama, Architecture::kQwen2, Architecture::kQwen3, Architecture::kMistral}) {
    for (bool tied : {false, true}) {
      ModelConfig c = Config(arch, 3, tied);
      auto model = LlamaModel::Create(c, testing::MakeBackend("reference"));
      ASSERT_TRUE(model.ok()) << model.status().ToString();
      EXPECT_EQ(ParameterCount(c), static_cast<double>((*model)->NumParameters()))
          << ArchitectureClassName(arch) << (tied ? " tied" : "");
    }
  }
}

TEST(MemoryCheckTest, RefusesAModelBeyondTheAvailableMemory) {
  Env* env = DefaultEnv();
  std::optional<uint64_t> available = AvailableMemoryBytes(env);
  ASSERT_TRUE(available.has_value());  // Linux: /proc/meminfo has MemAvailable
  EXPECT_GT(*available, 0u);
  ModelConfig small = Config(Architecture::kLlama, 2, true);
  EXPECT_TRUE(
      CheckModelFitsInMemory(env, small, TrainingBytes(DType::kF32, false), "training").ok());
  ModelConfig huge = small;
  huge.vocab_size = int64_t{1} << 40;  // 3.5e13 parameters: never fits
  Status s = CheckModelFitsInMemory(env, huge, TrainingBytes(DType::kF32, false), "training");
  EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("needs at least"));
  EXPECT_THAT(s.message(),
              HasSubstr("for training (3.518e+13 parameters x 16 bytes each: fp32 master weights"));
  EXPECT_THAT(s.message(), HasSubstr("is available"));
}

// Sharded training divides the need among the ranks, but the ranks on one host add up.
TEST(MemoryCheckTest, ShardingDividesTheNeedAndRanksOnAHostAddUp) {
  Env* env = DefaultEnv();
  std::optional<uint64_t> available = AvailableMemoryBytes(env);
  ASSERT_TRUE(available.has_value());
  // About four times the available memory for training (16 bytes per parameter).
  ModelConfig c = Config(Architecture::kLlama, 1, true);
  c.vocab_size = static_cast<int64_t>(static_cast<double>(*available) / 4.0 / 32.0);
  EXPECT_FALSE(CheckModelFitsInMemory(env, c, TrainingBytes(DType::kF32, false), "training").ok());
  MemoryShare sixteen{.per_rank = 1.0 / 16, .ranks_on_host = 1, .how = "FULL_SHARD over 16"};
  EXPECT_TRUE(
      CheckModelFitsInMemory(env, c, TrainingBytes(DType::kF32, false), "training", sixteen).ok());
  sixteen.ranks_on_host = 16;  // all sixteen on this host: the whole need again
  Status s = CheckModelFitsInMemory(env, c, TrainingBytes(DType::kF32, false), "training", sixteen);
  EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("FULL_SHARD over 16: each rank holds 0.0625 of the sharded "
                                     "part, and 16 ranks share this host"));
  // A whole bf16 copy per rank (NO_SHARD, SHARD_GRAD_OP) is not divided by the sharding.
  const ParameterBytes bf16 = TrainingBytes(DType::kBF16, true);
  EXPECT_EQ(bf16.sharded, 16.0);
  EXPECT_EQ(bf16.whole, 2.0);
  EXPECT_THAT(bf16.what, HasSubstr("a whole BF16 copy"));
  // Kept whole in fp32, the copy is the master (each rank's share of it): whole parameters,
  // sharded gradients and moments.
  const ParameterBytes f32 = TrainingBytes(DType::kF32, true);
  EXPECT_EQ(f32.whole, 4.0);
  EXPECT_EQ(f32.sharded, 12.0);
}

// On a GPU the need is checked against the device's free memory, per rank, with the GPU's advice.
TEST(MemoryCheckTest, OnAGpuTheNeedMeetsTheDevicesFreeMemory) {
  ModelConfig c = Config(Architecture::kLlama, 1, true);
  const double parameters = ParameterCount(c);
  const ParameterBytes bytes = TrainingBytes(DType::kBF16, true);  // 18 bytes each
  const auto needed = static_cast<uint64_t>(parameters * 18.0);
  const MemoryShare one;
  EXPECT_TRUE(CheckModelFitsOnDevice(c, bytes, "training", one, needed, "cuda:0 (a GPU)").ok());
  const Status s =
      CheckModelFitsOnDevice(c, bytes, "training", one, needed - 1024, "cuda:0 (a GPU)");
  EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("of GPU memory on cuda:0 (a GPU) for training"));
  EXPECT_THAT(s.message(), HasSubstr("torch_dtype: bfloat16"));
  EXPECT_THAT(s.message(), Not(HasSubstr("share this host")));
  // The working memory (activations, FSDP's buffers) counts too, named in the message.
  const WorkingBytes working{.bytes = 4096.0, .what = "activations for a micro-batch of 4 x 8"};
  EXPECT_TRUE(
      CheckModelFitsOnDevice(c, bytes, "training", one, needed + 4096, "cuda:0", working).ok());
  const Status tight =
      CheckModelFitsOnDevice(c, bytes, "training", one, needed + 4095, "cuda:0", working);
  EXPECT_EQ(tight.code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(tight.message(),
              HasSubstr("; plus 4.0 KiB of activations for a micro-batch of 4 x 8"));
  EXPECT_THAT(tight.message(), HasSubstr("activation_checkpointing"));
}

}  // namespace
}  // namespace air::engine
