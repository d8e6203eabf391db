// The pinned base environments (see base_environments.h). The pins match
// python/requirements-dev.txt, so a machine that ran scripts/setup.sh has every wheel in its pip
// cache (or the project venv already satisfies them when it builds the base).
#include "spec/base_environments.h"

namespace air::spec {

const std::vector<BaseEnvironment>& BaseEnvironments() {
  static const std::vector<BaseEnvironment> kBases = {
      {"4",
       "client image 4: PyTorch, MLflow, PyYAML and NumPy",
       {"torch==2.15.0", "numpy==2.4.6", "pyyaml==6.0.3", "mlflow==3.17.2"}},
  };
  return kBases;
}

const BaseEnvironment* FindBaseEnvironment(std::string_view version) {
  for (const auto& base : BaseEnvironments()) {
    if (base.version == version) return &base;
  }
  return nullptr;
}

std::string KnownBaseEnvironmentVersions() {
  std::string out;
  for (const auto& base : BaseEnvironments()) {
    if (!out.empty()) out += ", ";
    out += "'" + base.version + "'";
  }
  return out;
}

}  // namespace air::spec
