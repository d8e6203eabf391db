// Run preparation stages: run directory, parameters, node directories, secrets, dependencies.
#include "runtime/prepare.h"

#include <fmt/format.h>

#include "runtime/python_env.h"
#include "runtime/snapshot.h"
#include "secrets/resolve.h"
#include "secrets/secret_store.h"

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
  PythonEnvRequest request;
  request.requirements = environment.dependencies;
  if (environment.requirements_file) {
    std::string file = *environment.requirements_file;
    request.requirements_file =
        !file.empty() && file[0] == '/' ? file : spec.source_dir + "/" + file;
  }
  request.should_stop = should_stop;
  auto python_env = EnsurePythonEnv(layout, request, layout.SetupLog(run.id), env);
  if (!python_env.ok()) return python_env.status().WithContext("environment.dependencies");
  return python_env->bin_dir;
}

Result<PreparedRun> PrepareRun(const spec::WorkloadSpec& spec, const store::RunRecord& run,
                               const Layout& layout, Env* env,
                               const std::function<bool()>& should_stop) {
  PreparedRun prepared;
  AIR_RETURN_IF_ERROR(env->CreateDirs(layout.RunDir(run.id)));
  AIR_ASSIGN_OR_RETURN(prepared.hyperparameters_path, WriteParametersFile(spec, run, layout, env));
  AIR_ASSIGN_OR_RETURN(prepared.secret_values, ResolveRunSecrets(spec, layout, env));
  AIR_ASSIGN_OR_RETURN(prepared.node_workdirs,
                       PrepareNodeDirectories(spec, run, layout, env, should_stop));
  AIR_ASSIGN_OR_RETURN(prepared.python_bin_dir,
                       PrepareDependencies(spec, run, layout, env, should_stop));
  return prepared;
}

}  // namespace air::runtime
