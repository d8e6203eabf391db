// The Hugging Face hub cache directories a hub id ("ORG/NAME") is looked up in — for models
// (engine/io/hf_hub.h: models--ORG--NAME) and for datasets (engine/data/dataset.h:
// datasets--ORG--NAME) alike, so both read the same variables in the same order.
//
// huggingface_hub's rule: $HF_HUB_CACHE, else the older $HUGGINGFACE_HUB_CACHE, else
// $HF_HOME/hub, where HF_HOME defaults to $XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface. The first directory below is where huggingface_hub itself looks; air
// looks in each of them in turn, so a model cached in the default place is still found when
// HF_HOME points elsewhere. Header-only (engine/data does not link engine/io); no state.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/env.h"

namespace air::engine {

inline std::vector<std::string> HfHubCacheDirs(Env* env) {
  std::vector<std::string> dirs;
  auto add = [&](const std::string& dir) {
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  };
  auto var = [&](const char* name) -> std::optional<std::string> {
    std::optional<std::string> v = env->GetEnv(name);
    return v && !v->empty() ? v : std::nullopt;
  };
  if (auto v = var("HF_HUB_CACHE")) add(*v);
  if (auto v = var("HUGGINGFACE_HUB_CACHE")) add(*v);
  if (auto v = var("HF_HOME")) add(*v + "/hub");
  if (auto v = var("XDG_CACHE_HOME")) add(*v + "/huggingface/hub");
  if (auto v = var("HOME")) add(*v + "/.cache/huggingface/hub");
  if (dirs.empty()) add(".cache/huggingface/hub");
  return dirs;
}

}  // namespace air::engine
