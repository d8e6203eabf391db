// Loading a workload YAML into a WorkloadSpec: read, check UTF-8, parse, apply overrides,
// validate every rule, and keep the parameters block's text. This is the one entry point for
// everything that reads a workload (the CLI's dry run and submit, the runtime, tests).
//
// All problems are collected in one pass into the LoadReport's diagnostics (see
// diagnostics.h); the Result is then InvalidArgument with a one-line summary. Loading never
// writes anything: the only effects are reads through the Env (the file, whether root_path and
// a requirements file exist).
// Thread safety: pure functions over their arguments; the Env must be thread safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "spec/diagnostics.h"
#include "spec/overrides.h"
#include "spec/workload_spec.h"

namespace air::spec {

inline constexpr size_t kMaxWorkloadFileBytes = 4 << 20;

struct LoadReport {
  Diagnostics diagnostics;              // every error, when loading failed
  std::vector<OverrideChange> changes;  // each override applied, in order (also on failure)
};

// Reads and validates the workload file at `path` (relative paths resolve against the
// process's working directory), applying `overrides` ("FIELD=VALUE") first.
Result<WorkloadSpec> LoadWorkloadSpec(const std::string& path,
                                      const std::vector<std::string>& overrides, Env* env,
                                      LoadReport* report);

// The same for text already in memory; `path` names the file in messages and its directory
// is where relative paths (root_path, a requirements file) resolve.
Result<WorkloadSpec> ParseWorkloadSpec(std::string_view text, const std::string& path,
                                       const std::vector<std::string>& overrides, Env* env,
                                       LoadReport* report);

}  // namespace air::spec
