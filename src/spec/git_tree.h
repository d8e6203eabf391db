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

// Runs argv[0] (looked up on PATH) with `argv`, capturing stdout and stderr; returns the exit
// status (or 128+signal). Fails only when the program cannot be started.
Result<int> RunCapture(const std::vector<std::string>& argv, std::string* out, std::string* err);

}  // namespace air::spec
