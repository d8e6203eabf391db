// Submitting a run: capabilities, snapshot, store, detached supervisor.
#include "runtime/submit.h"

#include <fmt/format.h>
#include <sodium.h>
#include <unistd.h>

#include <cerrno>

#include "backends/cluster_registry.h"
#include "base/private_dir.h"
#include "runtime/daemon.h"
#include "runtime/hashing.h"
#include "runtime/snapshot.h"
#include "runtime/spec_codec.h"
#include "runtime/submit_detail.h"
#include "runtime/tracking_link.h"
#include "runtime/volumes.h"
#include "runtime/watch.h"
#include "spec/snapshot_scan.h"
#include "tracking/entities.h"

namespace air::runtime {
std::string Where(const spec::WorkloadSpec& spec, const std::string& field) {
  spec::SourceLocation loc = spec.LocationOf(field);
  if (loc.line == 0) return fmt::format("{}: {}", spec.source_path, field);
  return fmt::format("{}:{}:{}: {}", spec.source_path, loc.line, loc.column, field);
}

Status CheckCapabilities(const spec::WorkloadSpec& spec,
                         const backends::ClusterCapabilities& capabilities) {
  if (spec.environment && spec.environment->docker_image && !capabilities.docker_images) {
    return InvalidArgument(fmt::format(
        "{}: the {} backend cannot run container images; remove docker_image and list the "
        "packages under environment.dependencies",
        Where(spec, "environment.docker_image"), capabilities.name));
  }
  if (capabilities.max_nodes > 0 && spec.compute.num_nodes > capabilities.max_nodes) {
    return InvalidArgument(fmt::format("{}: {} nodes requested; the {} backend runs at most {}",
                                       Where(spec, "compute.num_accelerators"),
                                       spec.compute.num_nodes, capabilities.name,
                                       capabilities.max_nodes));
  }
  const bool gpu = spec.compute.kind == spec::AcceleratorKind::kGpu;
  if (gpu && capabilities.max_gpus_per_node >= 0 &&
      spec.compute.per_node > capabilities.max_gpus_per_node) {
    return InvalidArgument(
        fmt::format("{}: {} needs {} GPU(s) on each node; the {} backend's nodes have at most {}",
                    Where(spec, "compute.accelerator_type"), spec.compute.accelerator_type,
                    spec.compute.per_node, capabilities.name, capabilities.max_gpus_per_node));
  }
  if (!gpu && capabilities.max_cpus_per_node > 0 &&
      spec.compute.per_node > capabilities.max_cpus_per_node) {
    return InvalidArgument(fmt::format(
        "{}: {} needs {} CPUs on each node (one per worker); the {} backend's nodes have at "
        "most {}",
        Where(spec, "compute.accelerator_type"), spec.compute.accelerator_type,
        spec.compute.per_node, capabilities.name, capabilities.max_cpus_per_node));
  }
  if (gpu && spec.compute.num_accelerators > capabilities.gpus_available) {
    return InvalidArgument(fmt::format(
        "{}: {} x {} needs {} GPU(s) ({} node(s) x {}); the {} backend has {} on this host; use "
        "accelerator_type CPU_<n> (n worker processes per node) for a CPU run",
        Where(spec, "compute.accelerator_type"), spec.compute.num_nodes,
        spec.compute.accelerator_type, spec.compute.num_accelerators, spec.compute.num_nodes,
        spec.compute.per_node, capabilities.name, capabilities.gpus_available));
  }
  return Status::Ok();
}

std::string NewMlflowRunId() { return tracking::NewRunId(); }

Result<SubmitResult> SubmitRunDetailed(const spec::WorkloadSpec& spec, const SubmitOptions& options,
                                       Env* env) {
  if (sodium_init() < 0) return Internal("libsodium failed to initialize");
  std::string home = options.air_home;
  if (home.empty()) return InvalidArgument("AIR_HOME is empty");
  if (home[0] != '/') {
    // The supervisor runs from "/": it must get an absolute AIR_HOME.
    char cwd[4096];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) return ErrnoStatus("getcwd", errno);
    home = std::string(cwd) + "/" + home;
  }
  // Checked before anything is written: a spec this backend cannot run creates nothing.
  AIR_ASSIGN_OR_RETURN(backends::ClusterConfig backend,
                       backends::LoadClusterConfig(home, options.backend, env));
  AIR_ASSIGN_OR_RETURN(backends::ClusterCapabilities capabilities,
                       backends::DescribeClusterBackend(backend, env));
  AIR_RETURN_IF_ERROR(CheckCapabilities(spec, capabilities));
  // An external MLflow server that cannot be reached, or refuses air's credentials, creates
  // nothing either.
  AIR_ASSIGN_OR_RETURN(ExternalTracking external,
                       CheckExternalTracking(backend.tracking, home, env));
  Layout layout(home, backend.shared_root, backend.volumes_root);
  // Owner-only: the store, logs and secrets of every run live here (one another user prepared
  // is refused before anything is written into it).
  AIR_RETURN_IF_ERROR(MakePrivateDir(layout.home(), env, "AIR_HOME"));
  if (layout.data_root() != layout.home()) {
    AIR_RETURN_IF_ERROR(MakePrivateDir(layout.data_root(), env, "shared_root"));
  }
  AIR_ASSIGN_OR_RETURN(std::string volumes_root, VolumesRoot(layout, env));
  AIR_RETURN_IF_ERROR(CheckSpecVolumes(spec, volumes_root, env).status());
  AIR_ASSIGN_OR_RETURN(auto store, store::Store::Open(layout.DbPath(), env));
  SubmitResult result;
  result.air_home = home;
  if (spec.idempotency_token) {
    AIR_ASSIGN_OR_RETURN(auto existing, store->FindRunByToken(*spec.idempotency_token));
    if (existing) {
      result.run_id = existing->id;
      return result;
    }
  }
  // Until the run is in the store, its snapshot is referenced by nothing: `air gc` waits.
  AIR_ASSIGN_OR_RETURN(FileLock retention,
                       env->LockFile(layout.RetentionLock(), FileLock::Mode::kShared));
  std::optional<std::string> snapshot_id;
  if (spec.code_source) {
    std::string field;
    auto listing = spec::ScanSnapshot(spec.code_source->snapshot, env, &field, home);
    if (!listing.ok()) {
      if (listing.status().code() == ErrorCode::kInvalidArgument && !field.empty()) {
        return InvalidArgument(Where(spec, field) + ": " + listing.status().message());
      }
      return listing.status().WithContext("code_source.snapshot");
    }
    auto snapshot = ArchiveSnapshot(layout, *listing, env);
    if (!snapshot.ok()) {
      Status failed = snapshot.status().WithContext(Where(spec, "code_source.snapshot.root_path") +
                                                    ": archiving the code snapshot");
      if (failed.code() != ErrorCode::kPermissionDenied) return failed;
      return Status(failed.code(), failed.message() +
                                       " (make it readable, or leave it out with .gitignore or "
                                       "code_source.snapshot.include_paths)");
    }
    snapshot_id = snapshot->id;
    result.snapshot_id = snapshot->id;
    result.snapshot_bytes = snapshot->total_bytes;
    result.snapshot_files = snapshot->entries.size();
  }
  store::NewRun run;
  run.experiment = spec.experiment_name;
  run.spec_json = SpecToJson(spec).dump();
  run.source_path = spec.source_path;
  run.accelerator_type = spec.compute.accelerator_type;
  run.num_nodes = spec.compute.num_nodes;
  run.per_node = spec.compute.per_node;
  run.max_retries = spec.max_retries;
  run.timeout_minutes = spec.timeout_minutes;
  run.idempotency_token = spec.idempotency_token;
  run.mlflow_run_id = NewMlflowRunId();
  run.snapshot_id = snapshot_id;
  run.backend = backend.name;
  AIR_ASSIGN_OR_RETURN(store::CreateRunResult created, store->CreateRun(run));
  result.run_id = created.run.id;
  result.created = created.created;
  if (!created.created) return result;  // a concurrent submit with the same token won
  if (Status tracked = CreateTrackingRun(store.get(), spec, created.run, external, env);
      !tracked.ok()) {
    (void)store->TransitionRun(result.run_id, store::RunState::kInternalError,
                               "could not create the tracking run: " + tracked.message(),
                               std::nullopt, tracked.message());
    return tracked.WithContext("creating the run's MLflow tracking run");
  }

  AIR_RETURN_IF_ERROR(MakePrivateDir(layout.RunsDir(), env));
  AIR_RETURN_IF_ERROR(MakePrivateDir(layout.RunDir(result.run_id), env));
  AIR_ASSIGN_OR_RETURN(std::string air_binary, CurrentExecutable());
  Status started = StartDetachedSupervisor(air_binary, result.run_id, layout.home(),
                                           layout.SupervisorLog(result.run_id));
  if (!started.ok()) {
    (void)store->TransitionRun(result.run_id, store::RunState::kInternalError,
                               "could not start the supervisor: " + started.message(), std::nullopt,
                               started.message());
    return started;
  }
  return result;
}

Result<std::string> SubmitRun(const spec::WorkloadSpec& spec, const SubmitOptions& options,
                              Env* env) {
  AIR_ASSIGN_OR_RETURN(SubmitResult submitted, SubmitRunDetailed(spec, options, env));
  std::string id = std::to_string(submitted.run_id);
  if (!options.watch) return id;
  AIR_ASSIGN_OR_RETURN(Layout layout, ResolveLayout(submitted.air_home, env));
  AIR_ASSIGN_OR_RETURN(store::RunRecord run,
                       WatchRun(layout, submitted.run_id, WatchOptions{}, env));
  if (run.state != store::RunState::kSucceeded) {
    return FailedPrecondition(
        fmt::format("run {} ended {}{}", id, store::RunStateName(run.state),
                    run.failure_summary.empty() ? "" : ": " + run.failure_summary));
  }
  return id;
}

}  // namespace air::runtime
