// Resolving a `model_name` to a local directory, the way transformers does offline:
//   1. an existing directory (absolute or relative path) is used as is;
//   2. a hub id "ORG/NAME" is looked up in the Hugging Face cache (each directory of
//      engine/hf_cache_dirs.h in turn), in the folder models--ORG--NAME/snapshots/<rev>, where
//      <rev> is the content of refs/<revision> (revision defaults to "main") or, when `revision` is
//      itself a snapshot name, that one.
// If nothing is found, NotFound lists every place it looked. Nothing is downloaded.
// Thread safety: reads the process environment through Env; no state.
#pragma once

#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air::engine {

Result<std::string> ResolveModelDir(const std::string& model_name, Env* env,
                                    const std::string& revision = "main");

// The hub cache directory huggingface_hub itself would use (the first of HfHubCacheDirs).
std::string HfHubCacheDir(Env* env);

}  // namespace air::engine
