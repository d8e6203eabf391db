// config.json parsing: what transformers 4.x and 5.x write, per-architecture flags, sliding
// windows, RoPE settings, and an error naming the file and field for everything else.
#include "engine/io/hf_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/model/rope.h"

namespace air::engine {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

json LlamaJson() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-05, "max_position_embeddings": 2048, "tie_word_embeddings": false,
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 8192},
    "bos_token_id": 1, "eos_token_id": [2, 3], "pad_token_id": null, "dtype": "bfloat16"})");
}

Result<ModelConfig> Parse(const json& j) { return ModelConfigFromJson(j, "cfg/config.json"); }

TEST(HfConfig, ParsesTransformers5Llama) {
  auto c = Parse(LlamaJson());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kLlama);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->rope.type, "llama3");
  EXPECT_DOUBLE_EQ(c->rope.theta, 500000.0);
  EXPECT_EQ(c->rope.original_max_position_embeddings, 8192);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c->pad_token_id, -1);
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  EXPECT_FALSE(c->has_qkv_bias());
  EXPECT_EQ(c->sliding_window(0), 0);
}

TEST(HfConfig, ParsesTransformers4RopeScalingAndDefaults) {
  json j = LlamaJson();
  j.erase("rope_parameters");
  j.erase("num_key_value_heads");
  j["rope_theta"] = 10000.0;
  j["rope_scaling"] = {
      {"type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}};
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_kv_heads, 4);  // defaults to num_attention_heads
  EXPECT_DOUBLE_EQ(c->rope.factor, 32.0);
  EXPECT_EQ(c->rope.original_max_position_embeddings, 2048);  // max_position_embeddings
  j["rope_scaling"] = nullptr;
  EXPECT_EQ(Parse(j)->rope.type, "default");
}

TEST(HfConfig, ArchitectureFlags) {
  json j = LlamaJson();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["attention_bias"] = true;  // ignored: Qwen2 has q/k/v bias and no o bias, always
  auto qwen2 = Parse(j);
  ASSERT_TRUE(qwen2.ok());
  EXPECT_TRUE(qwen2->has_qkv_bias());
  EXPECT_FALSE(qwen2->has_o_bias());
  EXPECT_FALSE(qwen2->qk_norm);
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["head_dim"] = 32;
  auto qwen3 = Parse(j);
  ASSERT_TRUE(qwen3.ok());
  EXPECT_TRUE(qwen3->qk_norm);
  EXPECT_EQ(qwen3->q_dim(), 128);
  EXPECT_TRUE(qwen3->has_o_bias());  // Qwen3 reads attention_bias for all four projections
}

TEST(HfConfig, SlidingWindows) {
  json j = LlamaJson();
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = 4096;
  auto mistral = Parse(j);
  ASSERT_TRUE(mistral.ok());
  EXPECT_EQ(mistral->sliding_window(0), 4096);
  EXPECT_EQ(mistral->sliding_window(1), 4096);
  j["sliding_window"] = nullptr;
  EXPECT_EQ(Parse(j)->sliding_window(1), 0);

  j["architectures"] = {"Qwen2ForCausalLM"};
  j["sliding_window"] = 128;
  j["use_sliding_window"] = false;  // transformers 4.x files keep the number but disable it
  EXPECT_EQ(Parse(j)->sliding_window(1), 0);
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 1;
  auto qwen = Parse(j);
  EXPECT_EQ(qwen->sliding_window(0), 0);
  EXPECT_EQ(qwen->sliding_window(1), 128);
  j["layer_types"] = {"sliding_attention", "full_attention"};
  qwen = Parse(j);
  EXPECT_EQ(qwen->sliding_window(0), 128);
  EXPECT_EQ(qwen->sliding_window(1), 0);
}

TEST(HfConfig, UnknownArchitectureNamesItAndListsSupported) {
  json j = LlamaJson();
  j["architectures"] = {"GPT2LMHeadModel"};
  Status s = Parse(j).status();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("cfg/config.json"), HasSubstr("'GPT2LMHeadModel'"),
                                 HasSubstr("LlamaForCausalLM"), HasSubstr("Qwen2ForCausalLM"),
                                 HasSubstr("Qwen3ForCausalLM"), HasSubstr("MistralForCausalLM")));
  j["architectures"] = {"LlamaForCausalLm"};
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("did you mean 'LlamaForCausalLM'"));
  j.erase("architectures");
  j["model_type"] = "gemma";
  EXPECT_THAT(Parse(j).status().message(),
              AllOf(HasSubstr("model_type 'gemma' is not supported"),
                    HasSubstr("supported model types: llama, qwen2, qwen3, mistral, gpt_oss"),
                    HasSubstr("GptOssForCausalLM")));
  j["architectures"] = {"GemmaForCausalLM"};  // both named, the supported types listed
  EXPECT_THAT(Parse(j).status().message(),
              AllOf(HasSubstr("architecture 'GemmaForCausalLM' (model_type 'gemma')"),
                    HasSubstr("llama, qwen2, qwen3, mistral, gpt_oss")));
}

struct BadField {
  const char* field;
  json value;
  const char* expected;
};

class HfConfigErrors : public ::testing::TestWithParam<BadField> {};

TEST_P(HfConfigErrors, NameFileAndField) {
  json j = LlamaJson();
  if (GetParam().value.is_discarded()) {
    j.erase(GetParam().field);
  } else {
    j[GetParam().field] = GetParam().value;
  }
  Status s = Parse(j).status();
  ASSERT_FALSE(s.ok()) << GetParam().field;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("cfg/config.json"), HasSubstr(GetParam().expected)));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, HfConfigErrors,
    ::testing::Values(
        BadField{"hidden_size", json::value_t::discarded, "'hidden_size' is required"},
        BadField{"hidden_size", "64", "'hidden_size' must be an integer"},
        BadField{"vocab_size", 0, "'vocab_size' must be a positive integer"},
        // Sized a per-layer vector before validation: 1e12 layers was std::bad_alloc.
        BadField{"num_hidden_layers", int64_t{1000000000000},
                 "'num_hidden_layers' is 1000000000000; at most 1024 layers"},
        BadField{"num_key_value_heads", 3, "multiple of num_key_value_heads"},
        BadField{"head_dim", 15, "head_dim must be even"},
        BadField{"tie_word_embeddings", "yes", "'tie_word_embeddings' must be true or false"},
        BadField{"hidden_act", "gelu", "'hidden_act' is 'gelu'"},
        BadField{"rms_norm_eps", -1.0, "rms_norm_eps"},
        BadField{"rope_parameters", json{{"rope_type", "yarn"}, {"factor", 4.0}},
                 "supported RoPE types: default, llama3"},
        BadField{"rope_parameters",
                 json{{"rope_type", "llama3"},
                      {"factor", 8.0},
                      {"low_freq_factor", 4.0},
                      {"high_freq_factor", 1.0}},
                 "high_freq_factor > low_freq_factor"},
        BadField{"architectures", "LlamaForCausalLM", "list of class names"},
        BadField{"eos_token_id", "</s>", "'eos_token_id' must be an integer or a list"}));

// The fields every model type carries are read by one reader: the same values and the same
// errors for a Llama and a GPT-OSS config.json.
TEST(HfConfig, LlamaAndGptOssReadTheCommonFieldsAlike) {
  const json gpt_oss_base = {{"model_type", "gpt_oss"}};
  json llama = LlamaJson(), gpt_oss = gpt_oss_base;
  for (json* j : {&llama, &gpt_oss}) {
    j->erase("dtype");
    (*j)["torch_dtype"] = "bfloat16";
    (*j)["eos_token_id"] = 7;
    (*j)["tie_word_embeddings"] = true;
  }
  auto a = Parse(llama), b = Parse(gpt_oss);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->torch_dtype, "bfloat16");
  EXPECT_EQ(b->torch_dtype, "bfloat16");
  EXPECT_EQ(a->eos_token_ids, std::vector<int64_t>{7});
  EXPECT_EQ(b->eos_token_ids, std::vector<int64_t>{7});
  EXPECT_TRUE(a->tie_word_embeddings && b->tie_word_embeddings);
  const std::pair<const char*, json> bad[] = {{"vocab_size", "many"},
                                              {"tie_word_embeddings", "yes"},
                                              {"initializer_range", "small"},
                                              {"bos_token_id", 1.5},
                                              {"eos_token_id", json::array({1, "two"})},
                                              {"pad_token_id", "none"},
                                              {"dtype", 16},
                                              {"torch_dtype", false}};
  for (const auto& [field, value] : bad) {
    json l = LlamaJson(), g = gpt_oss_base;
    if (std::string(field) == "torch_dtype") l.erase("dtype");
    l[field] = value;
    g[field] = value;
    const Status sl = Parse(l).status(), sg = Parse(g).status();
    EXPECT_EQ(sl.code(), ErrorCode::kInvalidArgument) << field;
    EXPECT_THAT(sl.message(), HasSubstr("field '" + std::string(field) + "'"));
    EXPECT_EQ(sl.message(), sg.message()) << field;
  }
}

TEST(HfConfig, InvalidJsonTextNamesTheFile) {
  Status s = ParseModelConfig("{\"vocab_size\": 3,", "dir/config.json").status();
  EXPECT_THAT(s.message(), AllOf(HasSubstr("dir/config.json"), HasSubstr("not valid JSON")));
  EXPECT_EQ(LoadModelConfig("/nonexistent-model-dir").status().code(), ErrorCode::kNotFound);
}

TEST(HfConfig, ToJsonRoundTripsEveryArchitecture) {
  for (const char* arch :
       {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM"}) {
    json j = LlamaJson();
    j["architectures"] = {arch};
    if (std::string(arch) == "MistralForCausalLM") j["sliding_window"] = 7;
    if (std::string(arch) == "Qwen2ForCausalLM") {
      j["use_sliding_window"] = true;
      j["sliding_window"] = 9;
      j["max_window_layers"] = 1;
    }
    auto c = Parse(j);
    ASSERT_TRUE(c.ok()) << arch << ": " << c.status().ToString();
    auto again = ModelConfigFromJson(json::parse(ModelConfigToJson(*c, "float32").dump()), "x");
    ASSERT_TRUE(again.ok()) << arch << ": " << again.status().ToString();
    EXPECT_EQ(again->arch, c->arch);
    EXPECT_EQ(again->layer_sliding_window, c->layer_sliding_window) << arch;
    EXPECT_EQ(again->rope.type, c->rope.type);
    EXPECT_EQ(again->rope.factor, c->rope.factor);
    EXPECT_EQ(again->eos_token_ids, c->eos_token_ids);
    EXPECT_EQ(again->head_dim, c->head_dim);
    EXPECT_EQ(again->has_qkv_bias(), c->has_qkv_bias());
  }
}

TEST(Rope, Llama3ScalingFollowsTheThreeRegimes) {
  ModelConfig c = *Parse(LlamaJson());
  c.head_dim = 16;
  c.rope.theta = 500000.0;
  c.rope.original_max_position_embeddings = 64;  // wavelengths: < 16 kept, > 64 / 8, blend
  const auto scaled = RopeInverseFrequencies(c);
  c.rope.type = "default";
  const auto plain = RopeInverseFrequencies(c);
  ASSERT_EQ(scaled.size(), 8u);
  int kept = 0, divided = 0, blended = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const double wavelen = 2 * M_PI / plain[i];
    if (wavelen < 16) {
      EXPECT_EQ(scaled[i], plain[i]);
      ++kept;
    } else if (wavelen > 64) {
      EXPECT_FLOAT_EQ(scaled[i], plain[i] / 8.0f);
      ++divided;
    } else {
      const double s = (64 / wavelen - 1.0) / 3.0;
      EXPECT_NEAR(scaled[i], (1 - s) * plain[i] / 8 + s * plain[i], 1e-6 * plain[i]);
      ++blended;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
  EXPECT_FLOAT_EQ(plain[1], 1.0f / std::pow(500000.0f, 2.0f / 16.0f));
}

}  // namespace
}  // namespace air::engine
