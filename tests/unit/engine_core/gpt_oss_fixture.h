// A tiny GPT-OSS config, and the paths of the GPT-OSS fixtures made by
// tests/python/engine_ref/make_gpt_oss_fixtures.py with transformers (tests/data/gpt_oss/):
// configs/, tiny_bf16/ (a sharded bf16 checkpoint) and tiny_mxfp4/ (a sharded checkpoint with MXFP4
// experts and the parameters transformers loads from it in expected.safetensors).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/model/gpt_oss_config.h"

namespace air::engine::testing {

// A two-layer GPT-OSS (a sliding and a full attention layer, 4 experts of which 2 per token,
// YaRN RoPE) small enough for every test to build and run in milliseconds.
inline ModelConfig TinyGptOssConfig() {
  GptOssConfig g;
  g.vocab_size = 50;
  g.hidden_size = 32;
  g.intermediate_size = 16;
  g.num_layers = 2;
  g.num_heads = 4;
  g.num_kv_heads = 2;
  g.head_dim = 8;
  g.num_experts = 4;
  g.experts_per_token = 2;
  g.sliding_window = 4;
  g.layer_sliding_window = {4, 0};
  g.rope.factor = 4.0;
  g.rope.original_max_position_embeddings = 8;
  g.rope.attention_factor = YarnAttentionFactor(4.0, 0, 0);
  g.max_position_embeddings = 64;
  g.pad_token_id = 0;
  return GptOssModelConfig(g);
}

// tests/data/gpt_oss/NAME in the repository: $AIR_SOURCE_DIR (set by ctest), else found from
// this file's path or from the test binary's location (<repo>/<build>/bin/...), so that the
// binary also runs by hand.
inline std::string GptOssFixture(const std::string& name) {
  auto data = [](const std::filesystem::path& root) { return root / "tests" / "data" / "gpt_oss"; };
  std::filesystem::path dir;
  std::error_code ec;
  if (const char* src = std::getenv("AIR_SOURCE_DIR")) {
    dir = data(src);
  } else if (std::filesystem::is_directory(
                 data(std::filesystem::path(__FILE__).parent_path() / ".." / ".." / ".."), ec)) {
    dir = data(std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "..");
  } else {
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    for (std::filesystem::path p = exe.parent_path(); !ec && p != p.root_path();
         p = p.parent_path()) {
      std::error_code missing;
      if (std::filesystem::is_directory(data(p), missing)) {
        dir = data(p);
        break;
      }
    }
  }
  return (dir / name).string();
}

}  // namespace air::engine::testing
