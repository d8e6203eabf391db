// GPU leases for runs on one host (docs/node-environment.md): before an attempt's nodes start,
// its supervisor leases gpus_per_node x nodes of the host's devices in the store, so concurrent
// runs get disjoint devices; while too few are free the attempt waits (a "gpu" event names the
// runs holding them), and gives up on cancel or timeout. The lease ends with the attempt, and a
// run that ended or whose supervisor died holds nothing.
// Thread safety: one thread (the supervisor's); processes coordinate through the store.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "store/store.h"

namespace air::runtime {

struct GpuLeaseRequest {
  int64_t run_id = 0;
  int attempt = 0;
  std::vector<std::string> devices;  // the host's devices, in order
  size_t count = 0;
  int64_t poll_interval_us = 200'000;
  int64_t deadline_monotonic_us = 0;  // 0: none
  // Non-empty: stop waiting (the run is canceled); returned as the reason.
  std::function<std::string()> cancel_requested;
};

struct GpuLease {
  std::vector<std::string> devices;  // empty when the wait ended without a lease
  std::string gave_up;               // why not: the cancel reason or "timed out"
};

Result<GpuLease> AcquireGpus(store::Store* store, const GpuLeaseRequest& request, Env* env);

}  // namespace air::runtime
