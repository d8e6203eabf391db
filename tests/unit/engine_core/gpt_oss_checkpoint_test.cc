// GPT-OSS checkpoint layout against transformers: the tensors air expects for a config must be
// exactly those transformers' save_pretrained wrote for it (tests/data/gpt_oss/tiny_bf16/
// tensors.json), the sharded fixtures (bf16, and MXFP4 experts as the released checkpoints store
// them) must pass the check through WeightReader and their indexes, and a checkpoint missing
// expert tensors must be an error naming them.
#include "engine/io/gpt_oss_checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/io/gpt_oss_hf_config.h"
#include "gpt_oss_fixture.h"
#include "test_util.h"

namespace air::engine {
namespace {

using nlohmann::json;
using testing::GptOssFixture;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ScratchDir;

GptOssConfig TinyConfig(const std::string& dir) {
  auto config = LoadGptOssConfig(GptOssFixture(dir));
  AIR_ENGINE_CHECK(config.ok(), "fixture config does not parse");
  return *config;
}

TEST(GptOssCheckpoint, DenseTensorsAreWhatTransformersSaves) {
  std::ifstream in(GptOssFixture("tiny_bf16/tensors.json"));
  std::stringstream ss;
  ss << in.rdbuf();
  const json saved = json::parse(ss.str());
  std::map<std::string, Shape> want;
  for (const auto& [name, entry] : saved.items()) want[name] = entry[0].get<Shape>();
  std::map<std::string, Shape> got;
  for (const auto& spec :
       GptOssCheckpointTensors(TinyConfig("tiny_bf16"), GptOssExpertFormat::kDense)) {
    EXPECT_FALSE(spec.packed);
    got[spec.name] = spec.shape;
  }
  EXPECT_EQ(got, want);
}

TEST(GptOssCheckpoint, ShardedBf16AndMxfp4FixturesPassTheCheck) {
  for (const std::string dir : {"tiny_bf16", "tiny_mxfp4"}) {
    auto reader = WeightReader::Open(GptOssFixture(dir));
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    EXPECT_THAT((*reader)->FileList(), HasSubstr("-of-0000")) << "the fixture is sharded";
    const GptOssConfig config = TinyConfig(dir);
    EXPECT_EQ(GptOssExpertFormatOf(**reader, config),
              dir == "tiny_mxfp4" ? GptOssExpertFormat::kMxfp4 : GptOssExpertFormat::kDense);
    Status check = CheckGptOssCheckpoint(**reader, config);
    EXPECT_TRUE(check.ok()) << check.ToString();
    // Every name the check wants is in the index, and nothing else is there.
    EXPECT_EQ(GptOssCheckpointTensors(config, GptOssExpertFormatOf(**reader, config)).size(),
              (*reader)->Names().size());
  }
}

TEST(GptOssCheckpoint, Bf16WeightsLoadThroughTheIndex) {
  auto reader = WeightReader::Open(GptOssFixture("tiny_bf16"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const GptOssConfig config = TinyConfig("tiny_bf16");
  for (const auto& spec : GptOssCheckpointTensors(config, GptOssExpertFormat::kDense)) {
    Tensor t(spec.shape);
    Status read = (*reader)->ReadInto(spec.name, t);
    ASSERT_TRUE(read.ok()) << read.ToString();
  }
}

// Writes a single-file checkpoint of `config` with every tensor but those in `drop`.
void WriteCheckpoint(const std::string& dir, const GptOssConfig& config,
                     const std::set<std::string>& drop) {
  std::vector<Tensor> tensors;
  std::vector<std::string> names;
  for (const auto& spec : GptOssCheckpointTensors(config, GptOssExpertFormat::kDense)) {
    if (drop.count(spec.name)) continue;
    tensors.push_back(testing::RandomTensor(spec.shape, tensors.size()));
    names.push_back(spec.name);
  }
  std::vector<NamedTensorRef> refs;
  for (size_t i = 0; i < tensors.size(); ++i) refs.push_back({names[i], &tensors[i]});
  ASSERT_TRUE(
      WriteSafetensors(dir + "/model.safetensors", refs, DType::kBF16, {{"format", "pt"}}).ok());
}

TEST(GptOssCheckpoint, MissingExpertTensorsAreNamed) {
  ScratchDir dir;
  const GptOssConfig config = TinyConfig("tiny_bf16");
  WriteCheckpoint(
      dir.path(), config,
      {"model.layers.1.mlp.experts.down_proj", "model.layers.0.mlp.experts.gate_up_proj",
       "model.layers.0.mlp.experts.down_proj_bias", "model.layers.1.self_attn.sinks"});
  auto reader = WeightReader::Open(dir.path());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  Status check = CheckGptOssCheckpoint(**reader, config);
  ASSERT_FALSE(check.ok());
  EXPECT_THAT(check.message(), HasSubstr("3 dense expert tensors are missing"));
  EXPECT_THAT(check.message(), HasSubstr("model.layers.0.mlp.experts.gate_up_proj"));
  EXPECT_THAT(check.message(), HasSubstr("model.layers.1.mlp.experts.down_proj"));
  EXPECT_THAT(check.message(), HasSubstr("model.layers.0.mlp.experts.down_proj_bias"));
  EXPECT_THAT(check.message(),
              HasSubstr("1 other tensors are missing: model.layers.1.self_attn.sinks"));
  EXPECT_THAT(check.message(), HasSubstr(dir.path()));
}

TEST(GptOssCheckpoint, MissingMxfp4ScalesAndWrongShapesAreNamed) {
  // The MXFP4 fixture's config with two more experts than its tensors have.
  GptOssConfig config = TinyConfig("tiny_mxfp4");
  auto reader = WeightReader::Open(GptOssFixture("tiny_mxfp4"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  config.num_experts += 2;
  Status check = CheckGptOssCheckpoint(**reader, config, /*max_listed=*/3);
  ASSERT_FALSE(check.ok());
  EXPECT_THAT(check.message(), HasSubstr("model.layers.0.mlp.experts.gate_up_proj_blocks has shape "
                                         "[2, 64, 2, 16], expected [4, 64, 2, 16]"));
  EXPECT_THAT(check.message(), HasSubstr("more"));
  EXPECT_THAT(check.message(), Not(HasSubstr("missing")));
}

}  // namespace
}  // namespace air::engine
