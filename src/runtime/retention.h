// Retention (docs/run-directory.md): `air delete RUN...` and `air gc [--older-than D]` remove
// ended runs — their store rows and their run directory (logs, node directories, launch
// files, parameters) — and then whatever no remaining run uses: snapshot manifests, the blobs
// only those manifests held, and Python environments (base and per-run) that no remaining
// run's `environments` file names. Volumes are user data and never touched.
//
// Concurrency: the sweep holds AIR_HOME/retention.lock exclusively; a submit holds it shared
// from archiving its snapshot until its run is in the store, and preparation while it builds
// or reuses an environment until it has recorded it. So nothing a run is about to reference
// is removed under it. A run that has not ended is never deleted.
// Thread safety: stateless functions; processes coordinate through the lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "runtime/layout.h"
#include "store/store.h"

namespace air::runtime {

struct RetentionReport {
  std::vector<int64_t> deleted_runs;
  size_t manifests_removed = 0;
  size_t blobs_removed = 0;
  std::vector<std::string> environments_removed;  // names under envs/
  bool environments_kept_for_old_runs = false;    // a live run predates environment records
};

// Deletes the given runs (every one must exist and have ended; nothing is removed otherwise),
// then sweeps.
Result<RetentionReport> DeleteRuns(store::Store* store, const Layout& layout,
                                   const std::vector<int64_t>& run_ids, Env* env);

// Deletes every ended run that ended more than `older_than_us` ago (none when nullopt), then
// sweeps.
Result<RetentionReport> CollectGarbage(store::Store* store, const Layout& layout,
                                       std::optional<int64_t> older_than_us, Env* env);

// "30d", "12h", "90m", "45s" (a whole number and a unit) in microseconds; kInvalidArgument
// naming the text otherwise.
Result<int64_t> ParseRetentionAge(const std::string& text);

}  // namespace air::runtime
