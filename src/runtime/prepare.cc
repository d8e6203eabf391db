// Run preparation stages: run directory, parameters, node directories, secrets, dependencies.
#include "runtime/prepare.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

#include "base/private_dir.h"
#include "runtime/python_env.h"
#include "runtime/snapshot.h"
#include "runtime/volume_access.h"
#include "runtime/volumes.h"
#include "secrets/resolve.h"
#include "secrets/secret_store.h"
#include "spec/base_environments.h"

namespace air::runtime {

Result<std::string> WriteParametersFile(const spec::WorkloadSpec& spec, const store::RunRecord& run,
                                        const Layout& layout, Env* env) {
  if (!spec.parameters_yaml) return std::string();
  std::string path = layout.ParametersFile(run.id);
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(path, *spec.parameters_yaml, 0600)
                          .WithContext("parameters (HYPERPARAMETERS_PATH)"));
  return path;
}

Result<std::vector<std::string>> PrepareNodeDirectories(const spec::WorkloadSpec& spec,
                                                        const store::RunRecord& run,
                                                        const Layout& layout, Env* env,
                                                        const std::function<bool()>& should_stop) {
  std::optional<Snapshot> snapshot;
  if (run.snapshot_id) {
    auto loaded = LoadSnapshot(layout, *run.snapshot_id, env);
    if (!loaded.ok()) return loaded.status().WithContext("code_source.snapshot");
    snapshot = std::move(*loaded);
  }
  std::vector<std::string> dirs;
  for (int rank = 0; rank < spec.compute.num_nodes; ++rank) {
    if (should_stop && should_stop())
      return Cancelled("preparing the node directories was stopped");
    std::string dir = layout.NodeWorkDir(run.id, rank);
    // Fresh for every attempt: nothing an earlier attempt wrote is there.
    AIR_RETURN_IF_ERROR(env->RemoveAll(dir));
    if (snapshot) {
      AIR_RETURN_IF_ERROR(MaterializeSnapshot(layout, *snapshot, dir, env)
                              .WithContext(fmt::format("code_source.snapshot (node {})", rank)));
    } else {
      AIR_RETURN_IF_ERROR(env->CreateDirs(dir));
    }
    dirs.push_back(dir);
  }
  return dirs;
}

Result<std::vector<std::pair<std::string, std::string>>> ResolveRunSecrets(
    const spec::WorkloadSpec& spec, const Layout& layout, Env* env) {
  if (spec.secrets.empty()) return std::vector<std::pair<std::string, std::string>>();
  secrets::SecretStore store(env, layout.home());
  auto resolved = secrets::ResolveSecrets(store, spec.secrets);
  if (!resolved.ok()) return resolved.status().WithContext("secrets");
  return resolved;
}

Result<std::string> PrepareDependencies(const spec::WorkloadSpec& spec, const store::RunRecord& run,
                                        const Layout& layout, Env* env,
                                        const std::function<bool()>& should_stop) {
  if (!spec.environment) return std::string();
  const spec::EnvironmentSpec& environment = *spec.environment;
  if (environment.dependencies.empty() && !environment.requirements_file) return std::string();
  std::string used;  // the environments file: every envs/ entry this run depends on
  PythonEnvRequest request;
  request.requirements = environment.dependencies;
  if (environment.requirements_file) {
    std::string file = *environment.requirements_file;
    request.requirements_file =
        !file.empty() && file[0] == '/' ? file : spec.source_dir + "/" + file;
  }
  request.should_stop = should_stop;
  if (environment.version) {
    // The base environment first (built once, shared by every run naming this version), then
    // the run's dependencies in a venv layered on it.
    const spec::BaseEnvironment* base = spec::FindBaseEnvironment(*environment.version);
    if (base == nullptr) {
      return InvalidArgument(
          fmt::format("environment.version: '{}' is not a base environment "
                      "air defines; known versions: {}",
                      *environment.version, spec::KnownBaseEnvironmentVersions()));
    }
    PythonEnvRequest base_request;
    base_request.requirements = base->requirements;
    base_request.name_prefix = "base-" + base->version + "-";
    base_request.should_stop = should_stop;
    auto base_env = EnsurePythonEnv(layout, base_request, layout.SetupLog(run.id), env);
    if (!base_env.ok()) {
      return base_env.status().WithContext(
          fmt::format("environment.version '{}' (base environment)", base->version));
    }
    request.python = base_env->bin_dir + "/python";
    used += base_env->key + "\n";
  }
  auto python_env = EnsurePythonEnv(layout, request, layout.SetupLog(run.id), env);
  if (!python_env.ok()) return python_env.status().WithContext("environment.dependencies");
  used += python_env->key + "\n";
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(layout.RunEnvironmentsFile(run.id), used));
  return python_env->bin_dir;
}

Status ReadLogLimits(Env* env, PreparedRun* prepared) {
  // A whole number from `name`, at most `max`; `fallback` when unset.
  auto read = [env](const char* name, uint64_t fallback, uint64_t max,
                    const char* meaning) -> Result<uint64_t> {
    auto value = env->GetEnv(name);
    if (!value || value->empty()) return fallback;
    char* end = nullptr;
    errno = 0;
    unsigned long long parsed = std::strtoull(value->c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || (*value)[0] == '-' || parsed > max) {
      return InvalidArgument(
          fmt::format("{}='{}' is not valid: give a whole number ({})", name, *value, meaning));
    }
    return static_cast<uint64_t>(parsed);
  };
  AIR_ASSIGN_OR_RETURN(prepared->log_max_bytes,
                       read("AIR_NODE_LOG_MAX_BYTES", uint64_t{1} << 30, UINT64_MAX,
                            "bytes per node log before it rotates, 0 for no cap"));
  AIR_ASSIGN_OR_RETURN(uint64_t keep,
                       read("AIR_NODE_LOG_KEEP", 2, 1000, "rotated parts kept, 0..1000"));
  prepared->log_keep = static_cast<int>(keep);
  return Status::Ok();
}

Result<PreparedRun> PrepareRun(const spec::WorkloadSpec& spec, const store::RunRecord& run,
                               const Layout& layout, Env* env,
                               const std::function<bool()>& should_stop) {
  PreparedRun prepared;
  AIR_RETURN_IF_ERROR(ReadLogLimits(env, &prepared));
  AIR_RETURN_IF_ERROR(MakePrivateDir(layout.RunDir(run.id), env));
  AIR_ASSIGN_OR_RETURN(std::string volumes_root, VolumesRoot(layout, env));
  AIR_ASSIGN_OR_RETURN(prepared.volumes, RunVolumeAccess(spec, volumes_root, env));
  // The parameters as the nodes read them (their /Volumes paths rewritten where needed).
  AIR_ASSIGN_OR_RETURN(prepared.hyperparameters_path,
                       WriteParametersFile(SpecForNodes(spec, prepared.volumes), run, layout, env));
  AIR_ASSIGN_OR_RETURN(prepared.secret_values, ResolveRunSecrets(spec, layout, env));
  AIR_ASSIGN_OR_RETURN(prepared.node_workdirs,
                       PrepareNodeDirectories(spec, run, layout, env, should_stop));
  {
    // `air gc` must not remove an environment between its build (or reuse) and the record
    // that this run uses it.
    AIR_ASSIGN_OR_RETURN(FileLock retention, env->LockFile(layout.RetentionLock(),
                                                           FileLock::Mode::kShared, should_stop));
    AIR_ASSIGN_OR_RETURN(prepared.python_bin_dir,
                         PrepareDependencies(spec, run, layout, env, should_stop));
  }
  return prepared;
}

}  // namespace air::runtime
