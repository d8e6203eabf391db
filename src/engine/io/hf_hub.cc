// model_name -> local directory via the Hugging Face cache layout (see hf_hub.h).
#include "engine/io/hf_hub.h"

#include <algorithm>
#include <vector>

#include "base/strings.h"
#include "engine/hf_cache_dirs.h"

namespace air::engine {

std::string HfHubCacheDir(Env* env) { return HfHubCacheDirs(env).front(); }

Result<std::string> ResolveModelDir(const std::string& model_name, Env* env,
                                    const std::string& revision) {
  if (model_name.empty()) return InvalidArgument("model_name is empty");
  if (env->IsDirectory(model_name)) return model_name;
  std::vector<std::string> looked = {model_name + " (as a local directory)"};
  const bool hub_id_shape = model_name.find("..") == std::string::npos && model_name[0] != '/' &&
                            model_name[0] != '.' &&
                            std::count(model_name.begin(), model_name.end(), '/') <= 1;
  if (hub_id_shape) {
    std::string folder = "models--" + model_name;
    for (size_t pos = folder.find('/'); pos != std::string::npos; pos = folder.find('/')) {
      folder.replace(pos, 1, "--");
    }
    for (const std::string& cache : HfHubCacheDirs(env)) {
      const std::string repo = cache + "/" + folder;
      const std::string snapshots = repo + "/snapshots";
      // The revision may be a snapshot name itself (a commit hash).
      if (env->IsDirectory(snapshots + "/" + revision)) return snapshots + "/" + revision;
      const std::string ref_path = repo + "/refs/" + revision;
      if (env->FileExists(ref_path)) {
        auto ref = env->ReadFile(ref_path);
        if (ref.ok()) {
          const std::string commit(Trim(*ref));
          if (env->IsDirectory(snapshots + "/" + commit)) return snapshots + "/" + commit;
          looked.push_back(snapshots + "/" + commit + " (named by " + ref_path + ", but missing)");
          continue;
        }
      }
      looked.push_back(ref_path);
    }
  }
  return NotFound("model '" + model_name + "' not found. Looked in: " + Join(looked, "; ") +
                  ". Pass a local model directory, or put the model in the Hugging Face cache "
                  "(HF_HOME or HF_HUB_CACHE); air does not download models");
}

}  // namespace air::engine
