// GPT-OSS config.json parsing against transformers: each file in tests/data/gpt_oss/configs/
// (the released 120b/20b files, transformers 5's own output, files relying on defaults and
// aliases) must give the values transformers' GptOssConfig reads from it, recorded in
// expected.json by tests/python/engine_ref/make_gpt_oss_fixtures.py (including the YaRN
// attention factor of _compute_yarn_parameters). Bad files are errors naming the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

#include "engine/io/gpt_oss_hf_config.h"
#include "gpt_oss_fixture.h"

namespace air::engine {
namespace {

using nlohmann::json;
using testing::GptOssFixture;
using ::testing::HasSubstr;

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

class GptOssConfigVsTransformers : public ::testing::TestWithParam<std::string> {};

TEST_P(GptOssConfigVsTransformers, ParsesWhatTransformersReads) {
  const std::string path = GptOssFixture("configs/" + GetParam() + ".json");
  const json want = ReadJson(GptOssFixture("configs/expected.json")).at(GetParam());
  auto parsed = ParseGptOssConfig(ReadJson(path).dump(), path);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const GptOssConfig& c = *parsed;
  EXPECT_EQ(c.vocab_size, want["vocab_size"]);
  EXPECT_EQ(c.hidden_size, want["hidden_size"]);
  EXPECT_EQ(c.intermediate_size, want["intermediate_size"]);
  EXPECT_EQ(c.num_layers, want["num_hidden_layers"]);
  EXPECT_EQ(c.num_heads, want["num_attention_heads"]);
  EXPECT_EQ(c.num_kv_heads, want["num_key_value_heads"]);
  EXPECT_EQ(c.head_dim, want["head_dim"]);
  EXPECT_EQ(c.num_experts, want["num_local_experts"]);
  EXPECT_EQ(c.experts_per_token, want["num_experts_per_tok"]);
  EXPECT_EQ(c.max_position_embeddings, want["max_position_embeddings"]);
  EXPECT_EQ(c.rms_norm_eps, want["rms_norm_eps"].get<double>());
  EXPECT_EQ(c.swiglu_alpha, want["swiglu_alpha"].get<double>());
  EXPECT_EQ(c.swiglu_limit, want["swiglu_limit"].get<double>());
  EXPECT_EQ(c.attention_bias, want["attention_bias"]);
  EXPECT_EQ(c.tie_word_embeddings, want["tie_word_embeddings"]);
  EXPECT_EQ(c.router_aux_loss_coef, want["router_aux_loss_coef"].get<double>());
  EXPECT_EQ(c.output_router_logits, want["output_router_logits"]);
  EXPECT_EQ(c.mxfp4_experts, want["mxfp4"]);
  ASSERT_EQ(c.layer_sliding_window.size(), want["layer_types"].size());
  const int64_t window =
      want["sliding_window"].is_null() ? 0 : want["sliding_window"].get<int64_t>();
  for (size_t l = 0; l < c.layer_sliding_window.size(); ++l) {
    const bool sliding = want["layer_types"][l] == "sliding_attention";
    EXPECT_EQ(c.layer_sliding_window[l], sliding ? window : 0) << "layer " << l;
  }
  if (want["eos_token_id"].is_null()) {
    EXPECT_TRUE(c.eos_token_ids.empty());
  } else if (want["eos_token_id"].is_array()) {
    EXPECT_EQ(json(c.eos_token_ids), want["eos_token_id"]);
  } else {
    EXPECT_EQ(json(c.eos_token_ids), json::array({want["eos_token_id"]}));
  }
  EXPECT_EQ(c.pad_token_id,
            want["pad_token_id"].is_null() ? -1 : want["pad_token_id"].get<int64_t>());
  EXPECT_EQ(c.rope.type, want["rope_type"]);
  EXPECT_EQ(c.rope.theta, want["rope_theta"].get<double>());
  EXPECT_EQ(c.rope.attention_factor, want["attention_factor"].get<double>());
  if (c.rope.type == "yarn") {
    EXPECT_EQ(c.rope.factor, want["factor"].get<double>());
    EXPECT_EQ(c.rope.beta_fast, want["beta_fast"].get<double>());
    EXPECT_EQ(c.rope.beta_slow, want["beta_slow"].get<double>());
    EXPECT_EQ(c.rope.truncate, want["truncate"]);
    EXPECT_EQ(c.rope.original_max_position_embeddings, want["original_max_position_embeddings"]);
  }
}

TEST_P(GptOssConfigVsTransformers, WritesAConfigThatParsesBackTheSame) {
  const std::string path = GptOssFixture("configs/" + GetParam() + ".json");
  auto parsed = ParseGptOssConfig(ReadJson(path).dump(), path);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto again =
      GptOssConfigFromJson(json::parse(GptOssConfigToJson(*parsed, "bfloat16").dump()), "written");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(GptOssConfigToJson(*again, "bfloat16"), GptOssConfigToJson(*parsed, "bfloat16"));
  EXPECT_EQ(again->layer_sliding_window, parsed->layer_sliding_window);
  EXPECT_EQ(again->rope.attention_factor, parsed->rope.attention_factor);
}

INSTANTIATE_TEST_SUITE_P(Configs, GptOssConfigVsTransformers,
                         ::testing::Values("released_120b", "released_20b", "transformers_default",
                                           "minimal", "aliases_and_defaults",
                                           "yarn_attention_factor", "default_rope"));

// `edit` applied to the released 120b config must fail naming `field`.
void ExpectError(const std::function<void(json&)>& edit, const std::string& field,
                 const std::string& also = "") {
  json j = ReadJson(GptOssFixture("configs/released_120b.json"));
  edit(j);
  auto parsed = GptOssConfigFromJson(j, "cfg/config.json");
  ASSERT_FALSE(parsed.ok()) << "accepted a config with a bad " << field;
  EXPECT_EQ(parsed.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("cfg/config.json"));
  EXPECT_THAT(parsed.status().message(), HasSubstr(field));
  if (!also.empty()) {
    EXPECT_THAT(parsed.status().message(), HasSubstr(also));
  }
}

TEST(GptOssConfig, BadFieldsAreErrorsNamingThem) {
  ExpectError([](json& j) { j["model_type"] = "llama"; }, "model_type", "gpt_oss");
  ExpectError([](json& j) { j["num_local_experts"] = "many"; }, "num_local_experts", "integer");
  ExpectError([](json& j) { j["num_experts_per_tok"] = 200; }, "num_experts_per_tok");
  ExpectError([](json& j) { j["num_key_value_heads"] = 7; }, "num_key_value_heads");
  ExpectError([](json& j) { j["hidden_size"] = 0; }, "hidden_size", "positive");
  ExpectError([](json& j) { j["layer_types"][3] = "chunked_attention"; }, "layer_types[3]");
  ExpectError([](json& j) { j["layer_types"].erase(0); }, "layer_types", "one type per layer");
  ExpectError([](json& j) { j["sliding_window"] = nullptr; }, "sliding_window", "layer_types[0]");
  ExpectError([](json& j) { j["rope_scaling"]["rope_type"] = "longrope"; }, "rope_scaling", "yarn");
  ExpectError([](json& j) { j["rope_scaling"]["factor"] = 0.5; }, "factor");
  ExpectError([](json& j) { j["rope_scaling"]["truncate"] = "no"; }, "truncate");
  ExpectError(
      [](json& j) {
        j["rope_scaling"] = json{{"full_attention", {{"rope_type", "yarn"}}}};
      },
      "per-layer-type");
  ExpectError([](json& j) { j["quantization_config"]["quant_method"] = "bitsandbytes"; },
              "quant_method", "mxfp4");
  ExpectError([](json& j) { j["attention_dropout"] = 0.1; }, "attention_dropout");
  ExpectError([](json& j) { j["swiglu_limit"] = -1.0; }, "swiglu_limit");
}

TEST(GptOssConfig, RecognizesGptOssByModelTypeOrArchitecture) {
  EXPECT_TRUE(IsGptOssConfig(json{{"model_type", "gpt_oss"}}));
  EXPECT_TRUE(IsGptOssConfig(json{{"architectures", {"GptOssForCausalLM"}}}));
  EXPECT_FALSE(IsGptOssConfig(json{{"model_type", "llama"}}));
  EXPECT_FALSE(IsGptOssConfig(json::array()));
  auto not_json = ParseGptOssConfig("{", "broken.json");
  ASSERT_FALSE(not_json.ok());
  EXPECT_THAT(not_json.status().message(), HasSubstr("broken.json"));
}

TEST(GptOssConfig, YarnAttentionFactorFollowsTransformers) {
  EXPECT_DOUBLE_EQ(YarnAttentionFactor(32.0, 0, 0), 0.1 * std::log(32.0) + 1.0);
  EXPECT_EQ(YarnAttentionFactor(1.0, 0, 0), 1.0);
  EXPECT_EQ(YarnAttentionFactor(0.5, 0, 0), 1.0);
  EXPECT_DOUBLE_EQ(YarnAttentionFactor(4.0, 1.0, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(YarnAttentionFactor(4.0, 2.0, 0), 0.1 * std::log(4.0) + 1.0);  // one of two
}

}  // namespace
}  // namespace air::engine
