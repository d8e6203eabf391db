// The backend registry and AIR_HOME/config.yaml.
#include "backends/cluster_registry.h"

#include <fmt/format.h>

#include "backends/local/local_backend.h"
#include "backends/slurm/slurm_backend.h"
#include "base/strings.h"
#include "secrets/names.h"
#include "spec/yaml_tree.h"

namespace air::backends {
namespace {

struct Registered {
  const char* name;
  Result<ClusterCapabilities> (*describe)(const ClusterConfig&, Env*);
  Result<std::unique_ptr<ClusterBackend>> (*create)(const ClusterConfig&, const std::string&, Env*);
  Result<std::string> (*detached)(const std::string& attempt_dir, Env*);
};

Result<std::string> NothingDetached(const std::string&, Env*) { return std::string(); }

Result<ClusterCapabilities> DescribeLocal(const ClusterConfig&, Env* env) {
  return LocalBackend::DescribeCapabilities(env);
}

Result<std::unique_ptr<ClusterBackend>> CreateLocal(const ClusterConfig&, const std::string& agent,
                                                    Env* env) {
  AIR_ASSIGN_OR_RETURN(auto backend, LocalBackend::Create(env, agent));
  return std::unique_ptr<ClusterBackend>(std::move(backend));
}

Result<ClusterCapabilities> DescribeSlurm(const ClusterConfig& config, Env* env) {
  return SlurmBackend::DescribeCapabilities(config.slurm, config.DataRoot(), env);
}

Result<std::unique_ptr<ClusterBackend>> CreateSlurm(const ClusterConfig& config,
                                                    const std::string& agent, Env* env) {
  std::string binary = config.slurm.air_binary.empty() ? agent : config.slurm.air_binary;
  AIR_ASSIGN_OR_RETURN(auto backend, SlurmBackend::Create(config.slurm, binary, env));
  return std::unique_ptr<ClusterBackend>(std::move(backend));
}

constexpr Registered kBackends[] = {
    {"local", DescribeLocal, CreateLocal, NothingDetached},
    {"slurm", DescribeSlurm, CreateSlurm, SlurmBackend::DescribeDetachedAttempt},
};

const Registered* Find(const std::string& name) {
  for (const auto& b : kBackends) {
    if (name == b.name) return &b;
  }
  return nullptr;
}

Status UnknownBackend(const std::string& where, const std::string& name) {
  return InvalidArgument(fmt::format("{}: unknown backend '{}'; valid: {}", where, name,
                                     Join(ClusterBackendNames(), ", ")));
}

constexpr char kValidKeys[] =
    "backend, shared_root, volumes_root, slurm, tracking_uri, tracking_token_secret, "
    "tracking_username_secret, tracking_password_secret, tracking_server";

// tracking_uri: an http(s) URL of an MLflow server.
Status ParseTrackingUri(const std::string& where, const std::string& value, std::string* out) {
  if (value.rfind("http://", 0) != 0 && value.rfind("https://", 0) != 0) {
    return InvalidArgument(
        fmt::format("{}: tracking_uri: '{}' is not an http:// or https:// URL of an MLflow server "
                    "(e.g. https://mlflow.example.com)",
                    where, value));
  }
  *out = value;
  while (out->size() > 1 && out->back() == '/') out->pop_back();
  return Status::Ok();
}

// tracking_*_secret: an air secret's scope/key.
Status ParseSecretPath(const std::string& where, const std::string& key, const std::string& value,
                       std::string* out) {
  size_t slash = value.find('/');
  if (slash == std::string::npos) {
    return InvalidArgument(fmt::format(
        "{}: {}: '{}' is not scope/key: name an air secret (`air secrets put SCOPE/KEY`)", where,
        key, value));
  }
  Status scope = secrets::ValidateName("scope", value.substr(0, slash));
  Status name = scope.ok() ? secrets::ValidateName("key", value.substr(slash + 1)) : scope;
  if (!name.ok()) return InvalidArgument(fmt::format("{}: {}: {}", where, key, name.message()));
  *out = value;
  return Status::Ok();
}

Status CheckTrackingConfig(const std::string& path, const TrackingConfig& t) {
  bool basic = !t.username_secret.empty() || !t.password_secret.empty();
  if (basic && (t.username_secret.empty() || t.password_secret.empty())) {
    return InvalidArgument(fmt::format(
        "{}: basic auth needs both tracking_username_secret and tracking_password_secret", path));
  }
  if (basic && !t.token_secret.empty()) {
    return InvalidArgument(fmt::format(
        "{}: give tracking_token_secret (a Bearer token) or tracking_username_secret and "
        "tracking_password_secret (basic auth), not both",
        path));
  }
  return Status::Ok();
}

// tracking_server: {host, port, advertise_host, artifact_max_file_size, artifact_max_run_size}.
Status ParseTrackingServer(const spec::YamlNode& block, const std::string& path,
                           TrackingServerConfig* out) {
  static constexpr char kKeys[] =
      "host, port, advertise_host, artifact_max_file_size, artifact_max_run_size";
  out->configured = true;
  if (block.IsScalar() && block.IsNull()) return Status::Ok();
  if (!block.IsMapping()) {
    return InvalidArgument(fmt::format("{}: tracking_server: expected a mapping ({})",
                                       spec::SourceLine(path, block), kKeys));
  }
  for (const auto& [key_node, value] : block.entries) {
    const std::string& key = key_node.value;
    if (!value.IsScalar() || value.IsNull() || value.value.empty()) {
      return InvalidArgument(fmt::format("{}: tracking_server.{}: expected a value",
                                         spec::SourceLine(path, value), key));
    }
    const std::string& text = value.value;
    if (key == "host") {
      out->host = text;
    } else if (key == "advertise_host") {
      out->advertise_host = text;
    } else if (key == "port") {
      if (text.find_first_not_of("0123456789") != std::string::npos || text.size() > 5 ||
          std::stoi(text) > 65535) {
        return InvalidArgument(fmt::format(
            "{}: tracking_server.port: '{}' is not a port (0 = any free one, up to 65535)",
            spec::SourceLine(path, value), text));
      }
      out->port = std::stoi(text);
    } else if (key == "artifact_max_file_size" || key == "artifact_max_run_size") {
      auto bytes = ParseByteSize(text);
      if (!bytes.ok() || *bytes == 0) {
        return InvalidArgument(fmt::format(
            "{}: tracking_server.{}: {}", spec::SourceLine(path, value), key,
            bytes.ok() ? std::string("must be more than 0 bytes") : bytes.status().message()));
      }
      (key == "artifact_max_file_size" ? out->artifact_max_file_bytes
                                       : out->artifact_max_run_bytes) = *bytes;
    } else {
      return InvalidArgument(fmt::format("{}: tracking_server: unknown key '{}'; valid: {}",
                                         spec::SourceLine(path, key_node), key, kKeys));
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> ClusterBackendNames() {
  std::vector<std::string> names;
  for (const auto& b : kBackends) names.push_back(b.name);
  return names;
}

Result<ClusterConfig> LoadClusterConfig(const std::string& air_home,
                                        const std::string& backend_override, Env* env) {
  ClusterConfig config;
  config.air_home = air_home;
  const std::string path = air_home + "/config.yaml";
  if (env->FileExists(path)) {
    config.config_path = path;
    AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
    AIR_ASSIGN_OR_RETURN(spec::YamlNode root, spec::LoadYaml(text, path));
    if (!(root.IsScalar() && root.IsNull())) {
      if (!root.IsMapping()) {
        return InvalidArgument(fmt::format("{}: expected a mapping with the keys {}",
                                           spec::SourceLine(path, root), kValidKeys));
      }
      for (const auto& [key_node, value] : root.entries) {
        if (!key_node.IsScalar()) {
          return InvalidArgument(fmt::format("{}: a key must be a string, got {}; valid: {}",
                                             spec::SourceLine(path, key_node),
                                             spec::DescribeNode(key_node), kValidKeys));
        }
        const std::string& key = key_node.value;
        // A string value: a scalar that is not null.
        auto text_of = [&](const char* what) -> Result<std::string> {
          if (!value.IsScalar() || value.IsNull()) {
            return InvalidArgument(fmt::format("{}: {}: expected {}, got {}",
                                               spec::SourceLine(path, value), key, what,
                                               spec::DescribeNode(value)));
          }
          return value.value;
        };
        if (key == "backend") {
          AIR_ASSIGN_OR_RETURN(config.name, text_of("a backend name"));
          if (Find(config.name) == nullptr) {
            return UnknownBackend(spec::SourceLine(path, value) + ": backend", config.name);
          }
        } else if (key == "shared_root" || key == "volumes_root") {
          std::string& dir = key == "shared_root" ? config.shared_root : config.volumes_root;
          AIR_ASSIGN_OR_RETURN(dir, text_of("a directory"));
          if (dir.empty() || dir[0] != '/') {
            return InvalidArgument(fmt::format(
                "{}: {}: '{}' is not an absolute path "
                "(a directory every node sees, "
                "e.g. /shared/$USER/{})",
                spec::SourceLine(path, value), key, dir, key == "shared_root" ? "air" : "volumes"));
          }
          while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
        } else if (key == "slurm") {
          AIR_RETURN_IF_ERROR(ParseSlurmConfig(value, path, &config.slurm));
        } else if (key == "tracking_server") {
          AIR_RETURN_IF_ERROR(ParseTrackingServer(value, path, &config.tracking_server));
        } else if (key == "tracking_uri") {
          AIR_ASSIGN_OR_RETURN(std::string uri, text_of("a URL"));
          AIR_RETURN_IF_ERROR(
              ParseTrackingUri(spec::SourceLine(path, value), uri, &config.tracking.uri));
        } else if (key == "tracking_token_secret" || key == "tracking_username_secret" ||
                   key == "tracking_password_secret") {
          AIR_ASSIGN_OR_RETURN(std::string ref, text_of("an air secret's scope/key"));
          TrackingConfig& t = config.tracking;
          std::string* out = key == "tracking_token_secret"      ? &t.token_secret
                             : key == "tracking_username_secret" ? &t.username_secret
                                                                 : &t.password_secret;
          AIR_RETURN_IF_ERROR(ParseSecretPath(spec::SourceLine(path, value), key, ref, out));
        } else {
          return InvalidArgument(fmt::format("{}: unknown key '{}'; valid: {}",
                                             spec::SourceLine(path, key_node), key, kValidKeys));
        }
      }
      config.tracking.config_path = path;
      AIR_RETURN_IF_ERROR(CheckTrackingConfig(path, config.tracking));
    }
  }
  if (!backend_override.empty()) {
    if (Find(backend_override) == nullptr) return UnknownBackend("--backend", backend_override);
    config.name = backend_override;
  }
  return config;
}

Result<ClusterCapabilities> DescribeClusterBackend(const ClusterConfig& config, Env* env) {
  const Registered* b = Find(config.name);
  if (b == nullptr) return UnknownBackend("backend", config.name);
  return b->describe(config, env);
}

Result<std::string> DescribeDetachedAttempt(const ClusterConfig& config,
                                            const std::string& attempt_dir, Env* env) {
  const Registered* b = Find(config.name);
  if (b == nullptr) return UnknownBackend("backend", config.name);
  return b->detached(attempt_dir, env);
}

Result<std::unique_ptr<ClusterBackend>> CreateClusterBackend(const ClusterConfig& config,
                                                             const std::string& agent_binary,
                                                             Env* env) {
  const Registered* b = Find(config.name);
  if (b == nullptr) return UnknownBackend("backend", config.name);
  return b->create(config, agent_binary, env);
}

}  // namespace air::backends
