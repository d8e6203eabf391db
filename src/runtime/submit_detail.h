// The stages of submitting a run (runtime/submit.h is the CLI's entry point): check the spec
// against the backend's capabilities, archive the code snapshot, create the PENDING run in the
// store (or find the run holding the same idempotency_token), and start its detached
// supervisor. Each stage is a function so it can be tested alone.
// Thread safety: called from the CLI's main thread (starting the supervisor forks).
#pragma once

#include <optional>
#include <string>

#include "backends/cluster_backend.h"
#include "base/env.h"
#include "base/status.h"
#include "runtime/layout.h"
#include "runtime/submit.h"
#include "spec/workload_spec.h"
#include "store/store.h"

namespace air::runtime {

struct SubmitResult {
  int64_t run_id = 0;
  std::string air_home;  // absolute
  bool created = false;  // false: idempotency_token matched an existing run
  std::string snapshot_id;
  uint64_t snapshot_bytes = 0;
  size_t snapshot_files = 0;
};

// "FILE:LINE:COL: field" (or "FILE: field" for a value without a position), for errors found
// after validation.
std::string Where(const spec::WorkloadSpec& spec, const std::string& field);

// InvalidArgument naming the field (with FILE:LINE:COL) when the backend cannot run the spec.
Status CheckCapabilities(const spec::WorkloadSpec& spec,
                         const backends::ClusterCapabilities& capabilities);

// A fresh tracking run id shared by every node (32 hex digits).
std::string NewMlflowRunId();

Result<SubmitResult> SubmitRunDetailed(const spec::WorkloadSpec& spec, const SubmitOptions& options,
                                       Env* env);

}  // namespace air::runtime
