// Paths of the GPT-OSS fixtures made by tests/python/engine_ref/make_gpt_oss_fixtures.py with
// transformers (tests/data/gpt_oss/): configs/, tiny_bf16/ (a sharded bf16 checkpoint) and
// tiny_mxfp4/ (a sharded checkpoint with MXFP4 experts and the parameters transformers loads
// from it in expected.safetensors).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace air::engine::testing {

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
