// The stages a run goes through once, before its first attempt (docs/state-machine.md): the run
// directory, the parameters file, each node's working directory with its materialized code
// snapshot, the secret values, and the dependency environment. Each stage is a function that can
// be tested alone; an error names the spec field it comes from, and the run then ends FAILED
// before any command starts.
// Thread safety: stateless functions.
#pragma once

#include <functional>

#include "base/env.h"
#include "base/status.h"
#include "runtime/layout.h"
#include "runtime/node_plan.h"
#include "spec/workload_spec.h"
#include "store/store.h"

namespace air::runtime {

// Writes AIR_HOME/runs/<id>/parameters.yaml; returns its path ("" without parameters).
Result<std::string> WriteParametersFile(const spec::WorkloadSpec& spec, const store::RunRecord& run,
                                        const Layout& layout, Env* env);

// Creates each node's working directory afresh (an earlier attempt's is removed first),
// holding the run's code snapshot when it has one. `should_stop` (optional) is checked between
// nodes.
Result<std::vector<std::string>> PrepareNodeDirectories(
    const spec::WorkloadSpec& spec, const store::RunRecord& run, const Layout& layout, Env* env,
    const std::function<bool()>& should_stop = {});

// Resolves `secrets:` from the secret store under AIR_HOME (NAME -> value).
Result<std::vector<std::pair<std::string, std::string>>> ResolveRunSecrets(
    const spec::WorkloadSpec& spec, const Layout& layout, Env* env);

// Builds or reuses the dependency venv; returns its bin directory ("" without dependencies).
// Output goes to the run's setup.log. `should_stop` (optional) cancels a build in progress.
Result<std::string> PrepareDependencies(const spec::WorkloadSpec& spec, const store::RunRecord& run,
                                        const Layout& layout, Env* env,
                                        const std::function<bool()>& should_stop = {});

// The node log cap: $AIR_NODE_LOG_MAX_BYTES (default 1 GiB; 0: no cap) and the rotated parts
// kept, $AIR_NODE_LOG_KEEP (default 2). A value that is not a number is an error naming it.
Status ReadLogLimits(Env* env, PreparedRun* prepared);

// All of the above, in order.
Result<PreparedRun> PrepareRun(const spec::WorkloadSpec& spec, const store::RunRecord& run,
                               const Layout& layout, Env* env,
                               const std::function<bool()>& should_stop = {});

}  // namespace air::runtime
