// Listing the files of a git revision for a code snapshot: resolves `branch` or `commit` with
// `git rev-parse` and lists the tree with `git ls-tree -r -l -z`, each run as a subprocess
// without a shell (argv only; revision names are validated not to start with '-').
// Internal to snapshot_scan.cc.
// Thread safety: reentrant (each call spawns its own processes).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "spec/snapshot_scan.h"
#include "spec/workload_spec.h"

namespace air::spec {

// The full commit hash that `git` names in the repository containing `root`.
Result<std::string> ResolveGitRevision(const std::string& root, const GitRefSpec& git);

// Files of `commit` below `root` (paths relative to root), submodules skipped.
Result<std::vector<SnapshotFile>> ListGitTree(const std::string& root, const std::string& commit);

}  // namespace air::spec
