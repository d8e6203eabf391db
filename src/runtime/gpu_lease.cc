// Waiting for and taking a GPU lease (see gpu_lease.h).
#include "runtime/gpu_lease.h"

#include <fmt/format.h>

#include "base/strings.h"

namespace air::runtime {

Result<GpuLease> AcquireGpus(store::Store* store, const GpuLeaseRequest& request, Env* env) {
  GpuLease lease;
  if (request.count > request.devices.size()) {
    return FailedPrecondition(
        fmt::format("{} GPU(s) needed; this host has {}", request.count, request.devices.size()));
  }
  std::string waiting_for;  // the holders last reported, so the event is written once each
  while (true) {
    std::vector<int64_t> holders;
    AIR_ASSIGN_OR_RETURN(lease.devices,
                         store->LeaseDevices(request.run_id, request.attempt, request.devices,
                                             request.count, &holders));
    if (!lease.devices.empty()) {
      AIR_RETURN_IF_ERROR(store->AppendEvent(
          request.run_id, "gpu", "leased GPU(s) " + Join(lease.devices, ","), request.attempt));
      return lease;
    }
    std::vector<std::string> ids;
    for (int64_t id : holders) ids.push_back(std::to_string(id));
    std::string held_by = Join(ids, ", ");
    if (held_by != waiting_for) {
      waiting_for = held_by;
      AIR_RETURN_IF_ERROR(store->AppendEvent(
          request.run_id, "gpu",
          fmt::format("waiting for {} of this host's {} GPU(s): run(s) {} hold the others",
                      request.count, request.devices.size(), held_by),
          request.attempt));
    }
    if (request.cancel_requested) {
      if (std::string reason = request.cancel_requested(); !reason.empty()) {
        lease.gave_up = reason;
        return lease;
      }
    }
    if (request.deadline_monotonic_us != 0 &&
        env->MonotonicMicros() >= request.deadline_monotonic_us) {
      lease.gave_up = "timed out";
      return lease;
    }
    env->SleepMicros(request.poll_interval_us);
  }
}

}  // namespace air::runtime
