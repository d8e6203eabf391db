// ResolveLayout: AIR_HOME plus the shared_root and volumes_root of AIR_HOME/config.yaml
// (backends/cluster_registry.h).
#include "backends/cluster_registry.h"
#include "runtime/layout.h"

namespace air::runtime {

Result<Layout> ResolveLayout(const std::string& air_home, Env* env) {
  AIR_ASSIGN_OR_RETURN(backends::ClusterConfig config,
                       backends::LoadClusterConfig(air_home, "", env));
  return Layout(air_home, config.shared_root, config.volumes_root);
}

}  // namespace air::runtime
