// The base environments `environment.version` names (docs/node-environment.md): air's stand-in
// for the seed system's client images, each a pinned list of the packages that image ships
// (torch, mlflow, pyyaml, numpy: what the seed's train.py imports without listing them). The
// runtime builds each once into AIR_HOME/envs/base-<version>-<key> and layers a run's
// `dependencies` on top (runtime/python_env.h). This table is the one definition; the
// validator refuses a version not in it.
// Thread safety: immutable data.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace air::spec {

struct BaseEnvironment {
  std::string version;                    // as written in environment.version ("4")
  std::string description;                // one line for docs and errors
  std::vector<std::string> requirements;  // pinned pip requirements, in install order
};

const std::vector<BaseEnvironment>& BaseEnvironments();

// nullptr when `version` names no base environment.
const BaseEnvironment* FindBaseEnvironment(std::string_view version);

// "'4'" (comma-separated, quoted), for error messages.
std::string KnownBaseEnvironmentVersions();

}  // namespace air::spec
