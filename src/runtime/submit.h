// SubmitRun: the one call from `air run` (without --dry-run) into the runtime: it takes a
// validated WorkloadSpec, records the run under AIR_HOME, snapshots the code, starts the
// detached supervisor and returns the new run's id (with `watch`, after streaming node 0 until
// the run ends). Declared here by the spec/CLI side as the contract; implemented by the runtime.
// Thread safety: called from the CLI's main thread.
#pragma once

#include <string>

#include "base/env.h"
#include "base/status.h"
#include "spec/workload_spec.h"

namespace air::runtime {

struct SubmitOptions {
  std::string air_home;  // the AIR_HOME directory (created on first submit, never by a dry run)
  bool watch = false;    // stream node 0's log until the run ends
  std::string backend;   // `air run --backend NAME`; "" = AIR_HOME/config.yaml's, else local
};

Result<std::string> SubmitRun(const spec::WorkloadSpec& spec, const SubmitOptions& options,
                              Env* env);

}  // namespace air::runtime
