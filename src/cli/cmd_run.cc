// `air run -f FILE [--dry-run] [--watch [--node N]] [--override FIELD=VALUE]...`: load and validate
// a workload spec (every error at once, as FILE:LINE:COL: field: message, exit code 2), list its
// code snapshot, and then either print the resolved plan (--dry-run: nothing is started and
// nothing is written, not even AIR_HOME) or hand the spec to the runtime (SubmitValidatedRun).
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "cli/run_watch.h"
#include "runtime/layout.h"
#include "runtime/submit.h"
#include "runtime/submit_detail.h"
#include "runtime/volume_access.h"
#include "runtime/volumes.h"
#include "spec/parser.h"
#include "spec/plan.h"
#include "spec/snapshot_scan.h"
#include "spec/volume_paths.h"

namespace air::cli {
namespace {

struct RunFlags {
  std::string file;
  bool dry_run = false;
  bool watch = false;
  int watch_node = 0;
  std::string backend;
  std::vector<std::string> overrides;
};

// Submits a validated spec (runtime/submit_detail.h): prints the numeric run id (text: alone on
// stdout, so `ID=$(air run -f f.yaml)` works) and returns; with --watch, streams one node until
// the run ends and exits non-zero unless it SUCCEEDED. An idempotency_token that matches an
// earlier run returns that run instead of submitting again.
Status SubmitValidatedRun(CliContext& ctx, const spec::WorkloadSpec& spec, bool watch,
                          int watch_node, const std::string& backend) {
  if (watch && (watch_node < 0 || watch_node >= spec.compute.num_nodes)) {
    return InvalidArgument(
        fmt::format("--node {}: the run has {} node(s); valid: 0..{}; nothing was started",
                    watch_node, spec.compute.num_nodes, spec.compute.num_nodes - 1));
  }
  runtime::SubmitOptions options;
  AIR_ASSIGN_OR_RETURN(options.air_home, AirHome(ctx));
  options.backend = backend;
  AIR_ASSIGN_OR_RETURN(runtime::SubmitResult submitted,
                       runtime::SubmitRunDetailed(spec, options, ctx.env));
  if (!ctx.json()) {
    if (!submitted.created) {
      *ctx.err << "idempotency_token matches run " << submitted.run_id
               << "; returning it instead of submitting again\n";
    } else if (watch) {
      *ctx.err << "[air] run " << submitted.run_id << " submitted (" << spec.compute.num_nodes
               << " node(s)); streaming node " << watch_node
               << ". Ctrl-C stops watching, not the run.\n";
    }
  }
  if (!watch) {
    EmitData(ctx,
             {{"run_id", submitted.run_id},
              {"created", submitted.created},
              {"experiment", spec.experiment_name},
              {"num_nodes", spec.compute.num_nodes},
              {"snapshot_id", submitted.snapshot_id},
              {"snapshot_files", submitted.snapshot_files},
              {"snapshot_bytes", submitted.snapshot_bytes}},
             std::to_string(submitted.run_id));
    return Status::Ok();
  }
  if (ctx.json()) {
    *ctx.out << JsonLine(
                    Envelope(ctx, {{"run_id", submitted.run_id}, {"created", submitted.created}}))
             << "\n"
             << std::flush;
  } else {
    *ctx.out << submitted.run_id << "\n" << std::flush;
  }
  WatchRequest request;
  request.run_id = submitted.run_id;
  request.node = watch_node;
  return WatchAndReport(ctx, request);
}

nlohmann::json DiagnosticsJson(const std::vector<spec::SpecDiagnostic>& diagnostics) {
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& d : diagnostics) {
    nlohmann::json e = {{"file", d.file},
                        {"line", d.line},
                        {"column", d.column},
                        {"field", d.field},
                        {"message", d.message}};
    if (!d.origin.empty()) e["origin"] = d.origin;
    errors.push_back(e);
  }
  return errors;
}

nlohmann::json ChangesJson(const std::vector<spec::OverrideChange>& changes) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : changes) {
    out.push_back({{"field", c.field}, {"before", c.before}, {"after", c.after}});
  }
  return out;
}

// Prints every diagnostic (text: one line each on stderr; JSON: one error envelope).
void EmitSpecErrors(CliContext& ctx, const spec::LoadReport& report, const Status& summary) {
  std::vector<spec::SpecDiagnostic> sorted = report.diagnostics.Sorted();
  if (ctx.json()) {
    std::string message = summary.message() + ":";
    for (const auto& d : sorted) message += "\n" + d.ToString();
    EmitError(ctx, Status(summary.code(), message),
              {{"errors", DiagnosticsJson(sorted)}, {"overrides", ChangesJson(report.changes)}});
    return;
  }
  for (const auto& d : sorted) *ctx.err << d.ToString() << "\n";
  EmitError(ctx, Status(summary.code(), summary.message() + "; nothing was started"));
}

// What submit refuses about the spec's volume paths without writing anything (a path through a
// symbolic link under the root, no way for the nodes to reach /Volumes), and how the nodes
// would reach /Volumes, decided as submit decides (runtime/volume_access.h).
Result<spec::PlanVolumes> DryRunVolumes(CliContext& ctx, const spec::WorkloadSpec& workload) {
  AIR_ASSIGN_OR_RETURN(std::string air_home, AirHome(ctx));
  AIR_ASSIGN_OR_RETURN(runtime::Layout layout, runtime::ResolveLayout(air_home, ctx.env));
  AIR_ASSIGN_OR_RETURN(std::string root, runtime::VolumesRoot(layout, ctx.env));
  AIR_RETURN_IF_ERROR(runtime::CheckVolumeLinks(workload, root));
  runtime::VolumeAccessOptions options;
  options.dry_run = true;
  auto access = runtime::DecideVolumeAccess(workload, root, options);
  if (!access.ok()) {
    std::vector<spec::VolumeReference> refs = spec::FindVolumeReferences(workload);
    return Status(access.status().code(), fmt::format("{}: '{}' is a volume path, but {}",
                                                      runtime::Where(workload, refs[0].field),
                                                      refs[0].path, access.status().message()));
  }
  return spec::PlanVolumes{runtime::VolumeAccessName(access->kind), root,
                           runtime::DescribeVolumeAccess(*access)};
}

void RunCommand(CliContext& ctx, const RunFlags& flags) {
  spec::LoadReport report;
  Result<spec::WorkloadSpec> loaded =
      spec::LoadWorkloadSpec(flags.file, flags.overrides, ctx.env, &report);
  if (!ctx.json() && !report.changes.empty()) *ctx.out << spec::OverrideChangesText(report.changes);
  if (!loaded.ok()) {
    if (report.diagnostics.empty()) {
      EmitError(ctx, loaded.status());
    } else {
      EmitSpecErrors(ctx, report, loaded.status());
    }
    return;
  }
  const spec::WorkloadSpec& workload = *loaded;
  std::optional<spec::SnapshotListing> snapshot;
  if (workload.code_source) {
    std::string field;
    auto air_home = AirHome(ctx);
    if (!air_home.ok()) return EmitError(ctx, air_home.status());
    Result<spec::SnapshotListing> scanned =
        spec::ScanSnapshot(workload.code_source->snapshot, ctx.env, &field, *air_home);
    if (!scanned.ok()) {
      if (scanned.status().code() != ErrorCode::kInvalidArgument) {
        EmitError(ctx, scanned.status().WithContext("listing the code snapshot"));
        return;
      }
      report.diagnostics.Add(workload.LocationOf(field), field, scanned.status().message(),
                             workload.OriginOf(field));
      EmitSpecErrors(ctx, report, InvalidArgument(flags.file + " has 1 error"));
      return;
    }
    snapshot = std::move(*scanned);
  }
  // /Volumes paths in the command, env_variables and parameters (docs/volumes.md).
  std::vector<spec::VolumeProblem> volume_problems = spec::CheckVolumeReferences(workload);
  for (const auto& problem : volume_problems) {
    report.diagnostics.Add(workload.LocationOf(problem.field), problem.field, problem.message,
                           workload.OriginOf(problem.field));
  }
  if (!volume_problems.empty()) {
    EmitSpecErrors(
        ctx, report,
        InvalidArgument(fmt::format("{} has {} error{}", flags.file, volume_problems.size(),
                                    volume_problems.size() == 1 ? "" : "s")));
    return;
  }
  if (!flags.dry_run) {
    Status submitted =
        SubmitValidatedRun(ctx, workload, flags.watch, flags.watch_node, flags.backend);
    if (!submitted.ok()) EmitError(ctx, submitted);
    return;
  }
  // What submit refuses about the volume paths is refused here too. (The backend's
  // capabilities and the volume root's writability are checked at submit.)
  Result<spec::PlanVolumes> volumes = DryRunVolumes(ctx, workload);
  if (!volumes.ok()) return EmitError(ctx, volumes.status());
  spec::PlanInput input{&workload, snapshot ? &*snapshot : nullptr, &report.changes, &*volumes};
  EmitData(ctx, spec::PlanToJson(input), spec::PlanToText(input));
}

}  // namespace

void RegisterRunCommand(CLI::App& root, CliContext& ctx) {
  auto flags = std::make_shared<RunFlags>();
  auto* cmd = root.add_subcommand(
      "run", "validate a workload YAML and submit it, or show its plan with --dry-run");
  cmd->add_option("-f,--file", flags->file, "the workload YAML file")->required();
  cmd->add_flag("--dry-run", flags->dry_run,
                "validate and print the resolved plan; start nothing, write nothing");
  cmd->add_flag("--watch", flags->watch,
                "after submitting, stream node 0's log (or --node N's) until the run ends; exit "
                "non-zero unless it succeeded");
  cmd->add_option("--node", flags->watch_node, "with --watch: the node rank to stream (default 0)")
      ->needs("--watch");
  cmd->add_option(
      "--backend", flags->backend,
      "where the nodes run: local (this machine, the default) or a backend named in "
      "AIR_HOME/config.yaml's `backend:` (docs/slurm.md); the workload YAML is the same");
  cmd->add_option("--override", flags->overrides,
                  "FIELD=VALUE, a dotted path into the spec (repeatable), e.g. max_retries=0, "
                  "compute.num_accelerators=8, env_variables.FOO=bar, parameters.lr=1e-4")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->callback([&ctx, flags] { RunCommand(ctx, *flags); });
}

}  // namespace air::cli
