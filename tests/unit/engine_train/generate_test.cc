// Tests for the generation loop on a real tiny model: greedy decoding with the KV cache picks,
// at every step, the argmax of a full forward pass over the whole sequence so far; it stops at
// eos and at max_new_tokens; and it rejects prompts that do not fit.
#include "engine/train/generate.h"

#include <gtest/gtest.h>

#include "engine/backend/registry.h"
#include "engine/model/llama_model.h"

namespace air::engine::train {
namespace {

std::unique_ptr<LlamaModel> TinyModel() {
  ModelConfig c;
  c.vocab_size = 37;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.max_position_embeddings = 32;
  auto model = LlamaModel::Create(c, *CreateBackend({.kind = "reference"}));
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  (*model)->InitWeights(21);
  // Larger weights than the 0.02 default make the logits less flat (fewer near-ties).
  for (Parameter& p : (*model)->parameters()) {
    if (p.shape.size() >= 2) {
      // The reference backend's memory is host memory: scale the weights in place.
      for (int64_t i = 0; i < p.numel(); ++i) p.value.f32()[i] *= 10.0f;
    }
  }
  return std::move(*model);
}

// argmax of the last position's logits from a full forward pass over `tokens`.
int32_t FullForwardArgMax(LlamaModel& model, const std::vector<int32_t>& tokens) {
  TokenBatch batch;
  batch.batch_size = 1;
  batch.seq_len = static_cast<int>(tokens.size());
  batch.input_ids = tokens;
  batch.labels.assign(tokens.size(), kIgnoreIndex);
  for (size_t t = 0; t < tokens.size(); ++t) batch.position_ids.push_back(static_cast<int32_t>(t));
  batch.segment_ids.assign(tokens.size(), 1);
  auto r = model.Forward(batch, {.training = false, .return_logits = true});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  const int64_t vocab = model.config().vocab_size;
  std::span<const float> last(r->logits.data() + (tokens.size() - 1) * vocab, vocab);
  return ArgMax(last);
}

TEST(GenerateTest, GreedyWithKvCacheMatchesFullRecomputation) {
  auto model = TinyModel();
  std::vector<int32_t> prompt = {3, 14, 15, 9, 2};
  GenerateOptions options;
  options.max_new_tokens = 12;
  auto result = Generate(*model, prompt, options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->tokens.size(), 12u);
  EXPECT_FALSE(result->stopped_at_eos);
  std::vector<int32_t> sequence = prompt;
  for (int32_t token : result->tokens) {
    EXPECT_EQ(token, FullForwardArgMax(*model, sequence)) << "at length " << sequence.size();
    sequence.push_back(token);
  }
}

TEST(GenerateTest, StopsAtEosAndStreamsTokens) {
  auto model = TinyModel();
  std::vector<int32_t> prompt = {1, 2, 3};
  GenerateOptions options;
  options.max_new_tokens = 10;
  auto free_run = Generate(*model, prompt, options);
  ASSERT_TRUE(free_run.ok());
  // Declare the third generated token an eos: generation must stop right after it.
  options.eos_token_ids = {free_run->tokens[2]};
  std::vector<int32_t> streamed;
  auto stopped = Generate(*model, prompt, options, [&](int32_t t) { streamed.push_back(t); });
  ASSERT_TRUE(stopped.ok());
  EXPECT_TRUE(stopped->stopped_at_eos);
  const auto first_eos =
      std::find(free_run->tokens.begin(), free_run->tokens.end(), free_run->tokens[2]);
  EXPECT_EQ(stopped->tokens.size(), static_cast<size_t>(first_eos - free_run->tokens.begin()) + 1);
  EXPECT_EQ(streamed, stopped->tokens);
}

TEST(GenerateTest, SampledGenerationIsReproducibleBySeed) {
  auto model = TinyModel();
  std::vector<int32_t> prompt = {5, 6};
  GenerateOptions options;
  options.max_new_tokens = 8;
  options.sampling = {.temperature = 1.0, .top_p = 0.9, .seed = 4};
  auto a = Generate(*model, prompt, options);
  auto b = Generate(*model, prompt, options);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
}

TEST(GenerateTest, RejectsPromptsThatDoNotFit) {
  auto model = TinyModel();
  std::vector<int32_t> prompt(30, 1);
  GenerateOptions options;
  options.max_new_tokens = 5;
  auto r = Generate(*model, prompt, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max_position_embeddings (32)"), std::string::npos)
      << r.status().message();
  auto empty = Generate(*model, std::vector<int32_t>{}, options);
  EXPECT_FALSE(empty.ok());
}

}  // namespace
}  // namespace air::engine::train
