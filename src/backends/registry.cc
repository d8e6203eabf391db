// The backend registry and AIR_HOME/config.yaml.
#include "backends/registry.h"

#include <fmt/format.h>
// yaml-cpp 0.7's node/impl.h trips GCC 12's -Wdangling-pointer (a false positive in the library).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#include <yaml-cpp/yaml.h>
#pragma GCC diagnostic pop

#include "backends/local/local_backend.h"
#include "backends/slurm/slurm_backend.h"
#include "base/strings.h"

namespace air::backends {
namespace {

struct Registered {
  const char* name;
  Result<BackendCapabilities> (*describe)(const BackendConfig&, Env*);
  Result<std::unique_ptr<Backend>> (*create)(const BackendConfig&, const std::string&, Env*);
};

Result<BackendCapabilities> DescribeLocal(const BackendConfig&, Env* env) {
  return LocalBackend::DescribeCapabilities(env);
}

Result<std::unique_ptr<Backend>> CreateLocal(const BackendConfig&, const std::string& agent,
                                             Env* env) {
  AIR_ASSIGN_OR_RETURN(auto backend, LocalBackend::Create(env, agent));
  return std::unique_ptr<Backend>(std::move(backend));
}

Result<BackendCapabilities> DescribeSlurm(const BackendConfig& config, Env* env) {
  return SlurmBackend::DescribeCapabilities(config.slurm, config.DataRoot(), env);
}

Result<std::unique_ptr<Backend>> CreateSlurm(const BackendConfig& config, const std::string& agent,
                                             Env* env) {
  std::string binary = config.slurm.air_binary.empty() ? agent : config.slurm.air_binary;
  AIR_ASSIGN_OR_RETURN(auto backend, SlurmBackend::Create(config.slurm, binary, env));
  return std::unique_ptr<Backend>(std::move(backend));
}

constexpr Registered kBackends[] = {
    {"local", DescribeLocal, CreateLocal},
    {"slurm", DescribeSlurm, CreateSlurm},
};

const Registered* Find(const std::string& name) {
  for (const auto& b : kBackends) {
    if (name == b.name) return &b;
  }
  return nullptr;
}

std::string At(const std::string& path, const YAML::Node& node) {
  return fmt::format("{}:{}", path, node.Mark().line + 1);
}

Status UnknownBackend(const std::string& where, const std::string& name) {
  return InvalidArgument(
      fmt::format("{}: unknown backend '{}'; valid: {}", where, name, Join(BackendNames(), ", ")));
}

}  // namespace

std::vector<std::string> BackendNames() {
  std::vector<std::string> names;
  for (const auto& b : kBackends) names.push_back(b.name);
  return names;
}

Result<BackendConfig> LoadBackendConfig(const std::string& air_home,
                                        const std::string& backend_override, Env* env) {
  BackendConfig config;
  config.air_home = air_home;
  const std::string path = air_home + "/config.yaml";
  if (env->FileExists(path)) {
    config.config_path = path;
    AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      return InvalidArgument(
          fmt::format("{}:{}: not valid YAML: {}", path, e.mark.line + 1, e.msg));
    }
    if (root && !root.IsNull()) {
      if (!root.IsMap()) {
        return InvalidArgument(
            fmt::format("{}: expected a mapping with the keys backend, "
                        "shared_root, slurm",
                        At(path, root)));
      }
      try {
        for (const auto& item : root) {
          const std::string key = item.first.as<std::string>();
          const YAML::Node& value = item.second;
          if (key == "backend" || key == "shared_root") {
            if (!value.IsScalar()) {
              return InvalidArgument(
                  fmt::format("{}: {}: expected a string", At(path, value), key));
            }
            if (key == "backend") {
              config.name = value.as<std::string>();
              if (Find(config.name) == nullptr) {
                return UnknownBackend(At(path, value) + ": backend", config.name);
              }
            } else {
              config.shared_root = value.as<std::string>();
              if (config.shared_root.empty() || config.shared_root[0] != '/') {
                return InvalidArgument(
                    fmt::format("{}: shared_root: '{}' is not an absolute path "
                                "(a directory every node sees, "
                                "e.g. /shared/$USER/air)",
                                At(path, value), config.shared_root));
              }
              while (config.shared_root.size() > 1 && config.shared_root.back() == '/') {
                config.shared_root.pop_back();
              }
            }
          } else if (key == "slurm") {
            AIR_RETURN_IF_ERROR(ParseSlurmConfig(value, path, &config.slurm));
          } else {
            return InvalidArgument(
                fmt::format("{}: unknown key '{}'; valid: backend, shared_root, slurm",
                            At(path, item.first), key));
          }
        }
      } catch (const YAML::Exception& e) {
        return InvalidArgument(fmt::format("{}:{}: {}", path, e.mark.line + 1, e.msg));
      }
    }
  }
  if (!backend_override.empty()) {
    if (Find(backend_override) == nullptr) return UnknownBackend("--backend", backend_override);
    config.name = backend_override;
  }
  return config;
}

Result<BackendCapabilities> DescribeBackend(const BackendConfig& config, Env* env) {
  const Registered* b = Find(config.name);
  if (b == nullptr) return UnknownBackend("backend", config.name);
  return b->describe(config, env);
}

Result<std::unique_ptr<Backend>> CreateBackend(const BackendConfig& config,
                                               const std::string& agent_binary, Env* env) {
  const Registered* b = Find(config.name);
  if (b == nullptr) return UnknownBackend("backend", config.name);
  return b->create(config, agent_binary, env);
}

}  // namespace air::backends
