// Deleting runs and sweeping unused snapshots and environments (see retention.h).
#include "runtime/retention.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <set>

#include "base/strings.h"
#include "runtime/snapshot.h"

namespace air::runtime {
namespace {

Status RemoveRun(store::Store* store, const Layout& layout, int64_t run_id, Env* env) {
  AIR_RETURN_IF_ERROR(store->DeleteRun(run_id));
  return env->RemoveAll(layout.RunDir(run_id));
}

// Removes unreferenced manifests, then blobs no remaining manifest holds.
Status SweepSnapshots(const std::vector<store::RunRecord>& runs, const Layout& layout, Env* env,
                      RetentionReport* report) {
  std::set<std::string> referenced;
  for (const auto& run : runs) {
    if (run.snapshot_id) referenced.insert(*run.snapshot_id);
  }
  std::set<std::string> blobs;
  if (env->IsDirectory(layout.SnapshotsDir())) {
    AIR_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(layout.SnapshotsDir()));
    for (const auto& name : names) {
      std::string id = EndsWith(name, ".json") ? name.substr(0, name.size() - 5) : name;
      if (referenced.count(id) == 0) {
        AIR_RETURN_IF_ERROR(env->RemoveAll(layout.SnapshotsDir() + "/" + name));
        ++report->manifests_removed;
        continue;
      }
      auto snapshot = LoadSnapshot(layout, id, env);
      if (!snapshot.ok()) return snapshot.status().WithContext("retention: snapshot " + id);
      for (const auto& entry : snapshot->entries) {
        if (entry.is_symlink) continue;
        std::string blob = layout.CasPath(entry.digest);
        blobs.insert(blob);
        blobs.insert(blob + ".x");
      }
    }
  }
  if (!env->IsDirectory(layout.CasDir())) return Status::Ok();
  AIR_ASSIGN_OR_RETURN(std::vector<std::string> shards, env->ListDir(layout.CasDir()));
  for (const auto& shard : shards) {
    std::string dir = layout.CasDir() + "/" + shard;
    AIR_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
    for (const auto& name : names) {
      if (blobs.count(dir + "/" + name) != 0) continue;
      AIR_RETURN_IF_ERROR(env->RemoveAll(dir + "/" + name));
      ++report->blobs_removed;
    }
  }
  return Status::Ok();
}

// Removes environments (and their lock files) no remaining run records using.
Status SweepEnvironments(const std::vector<store::RunRecord>& runs, const Layout& layout, Env* env,
                         RetentionReport* report) {
  if (!env->IsDirectory(layout.EnvsDir())) return Status::Ok();
  std::set<std::string> used;
  for (const auto& run : runs) {
    std::string file = layout.RunEnvironmentsFile(run.id);
    if (!env->FileExists(file)) {
      // A live run started before runs recorded their environments: keep them all.
      if (!store::IsTerminal(run.state)) {
        report->environments_kept_for_old_runs = true;
        return Status::Ok();
      }
      continue;
    }
    AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(file));
    for (const auto& line : Split(text, '\n')) {
      if (!line.empty()) used.insert(line);
    }
  }
  AIR_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(layout.EnvsDir()));
  for (const auto& name : names) {
    std::string key = EndsWith(name, ".lock") ? name.substr(0, name.size() - 5) : name;
    if (used.count(key) != 0) continue;
    AIR_RETURN_IF_ERROR(env->RemoveAll(layout.EnvsDir() + "/" + name));
    if (key == name) report->environments_removed.push_back(name);
  }
  return Status::Ok();
}

Status Sweep(store::Store* store, const Layout& layout, Env* env, RetentionReport* report) {
  store::RunFilter all;
  AIR_ASSIGN_OR_RETURN(std::vector<store::RunRecord> runs, store->ListRuns(all));
  AIR_RETURN_IF_ERROR(SweepSnapshots(runs, layout, env, report));
  return SweepEnvironments(runs, layout, env, report);
}

}  // namespace

Result<RetentionReport> DeleteRuns(store::Store* store, const Layout& layout,
                                   const std::vector<int64_t>& run_ids, Env* env) {
  AIR_ASSIGN_OR_RETURN(FileLock lock,
                       env->LockFile(layout.RetentionLock(), FileLock::Mode::kExclusive));
  for (int64_t id : run_ids) {  // all or nothing: check every run before removing any
    AIR_ASSIGN_OR_RETURN(store::RunRecord run, store->GetRun(id));
    if (!store::IsTerminal(run.state)) {
      return FailedPrecondition(fmt::format(
          "run {} is {}; only ended runs can be deleted (stop it first: air cancel {}); nothing "
          "was deleted",
          id, store::RunStateName(run.state), id));
    }
  }
  RetentionReport report;
  for (int64_t id : run_ids) {
    AIR_RETURN_IF_ERROR(RemoveRun(store, layout, id, env));
    report.deleted_runs.push_back(id);
  }
  AIR_RETURN_IF_ERROR(Sweep(store, layout, env, &report));
  return report;
}

Result<RetentionReport> CollectGarbage(store::Store* store, const Layout& layout,
                                       std::optional<int64_t> older_than_us, Env* env) {
  AIR_ASSIGN_OR_RETURN(FileLock lock,
                       env->LockFile(layout.RetentionLock(), FileLock::Mode::kExclusive));
  RetentionReport report;
  if (older_than_us) {
    const int64_t cutoff = env->NowMicros() - *older_than_us;
    store::RunFilter all;
    AIR_ASSIGN_OR_RETURN(std::vector<store::RunRecord> runs, store->ListRuns(all));
    for (const auto& run : runs) {
      if (!store::IsTerminal(run.state)) continue;
      int64_t ended = run.ended_us.value_or(run.created_us);
      if (ended > cutoff) continue;
      AIR_RETURN_IF_ERROR(RemoveRun(store, layout, run.id, env));
      report.deleted_runs.push_back(run.id);
    }
  }
  AIR_RETURN_IF_ERROR(Sweep(store, layout, env, &report));
  return report;
}

Result<int64_t> ParseRetentionAge(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  std::string unit = end ? std::string(end) : "";
  int64_t scale = unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : unit == "d" ? 86400 : 0;
  if (text.empty() || end == text.c_str() || errno != 0 || value < 0 || scale == 0 ||
      value > INT64_MAX / 1'000'000 / scale) {
    return InvalidArgument(fmt::format(
        "--older-than '{}': give a whole number and a unit, e.g. 30d, 12h, 90m or 45s", text));
  }
  return int64_t{value} * scale * 1'000'000;
}

}  // namespace air::runtime
