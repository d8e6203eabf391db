// MFU's parts (engine/train/mfu.h): FLOPs per token counted by hand for a small dense config
// (PaLM's 6N + 12·L·q_dim·T; 4N with LoRA; sliding windows cap T), none for a mixture of
// experts; GPU peaks by name, specific names first, none for fp32, unknown GPUs or the CPU.
#include "engine/train/mfu.h"

#include <gtest/gtest.h>

#include <memory>

#include "engine/model/gpt_oss_config.h"

namespace air::engine::train {
namespace {

ModelConfig Small() {
  ModelConfig c;
  c.vocab_size = 100;
  c.hidden_size = 16;
  c.intermediate_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  return c;
}

TEST(Mfu, FlopsPerTokenOfADenseModel) {
  // Per layer: q, o 16x16 each; k, v 16x8 each; gate, up, down 16x32 each = 2304; two layers
  // plus the head 16x100 = 6208 matmul parameters. Attention: 12 x 2 layers x 16 x 64.
  const double matmul = 2 * (2 * 256 + 2 * 128 + 3 * 512) + 1600;
  EXPECT_DOUBLE_EQ(*TrainingFlopsPerToken(Small(), 64, false), 6 * matmul + 12.0 * 2 * 16 * 64);
  EXPECT_DOUBLE_EQ(*TrainingFlopsPerToken(Small(), 64, true), 4 * matmul + 12.0 * 2 * 16 * 64);
  ModelConfig windowed = Small();
  windowed.layer_sliding_window = {8, 0};
  EXPECT_DOUBLE_EQ(*TrainingFlopsPerToken(windowed, 64, false),
                   6 * matmul + 12.0 * 16 * 8 + 12.0 * 16 * 64);
  EXPECT_FALSE(TrainingFlopsPerToken(Small(), 0, false));
  ModelConfig moe = Small();
  moe.gpt_oss = std::make_shared<const GptOssConfig>();
  EXPECT_FALSE(TrainingFlopsPerToken(moe, 64, false));
}

TEST(Mfu, PeaksByDeviceName) {
  auto peak = [](const char* name) { return PeakDenseFlops(name, DType::kBF16); };
  EXPECT_DOUBLE_EQ(*peak("NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)"), 989.4e12);
  EXPECT_DOUBLE_EQ(*peak("cuda:0, NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"), 989.4e12);
  EXPECT_DOUBLE_EQ(*peak("NVIDIA H100 PCIe (sm_90, 114 SMs, 79.1 GiB)"), 756e12);
  EXPECT_DOUBLE_EQ(*peak("NVIDIA A100-SXM4-80GB (sm_80, 108 SMs, 79.2 GiB)"), 312e12);
  EXPECT_DOUBLE_EQ(*peak("NVIDIA A10 (sm_86, 72 SMs, 22.1 GiB)"), 125e12);
  EXPECT_DOUBLE_EQ(*peak("NVIDIA L40S (sm_89)"), 362.05e12);
  EXPECT_DOUBLE_EQ(*peak("NVIDIA L4 (sm_89)"), 121e12);
  EXPECT_FALSE(peak("NVIDIA A10G (sm_86)"));  // not on the table: no MFU, not a guess
  EXPECT_FALSE(peak("NVIDIA GeForce RTX 4090 (sm_89)"));
  EXPECT_FALSE(peak("AMD EPYC 7763 64-Core Processor (avx2)"));
  EXPECT_FALSE(PeakDenseFlops("NVIDIA H100 80GB HBM3", DType::kF32));
  EXPECT_DOUBLE_EQ(*PeakDenseFlops("NVIDIA H100 80GB HBM3", DType::kF16), 989.4e12);
}

}  // namespace
}  // namespace air::engine::train
