// NcclDataGroup: the DataGroup (data_group.h) of ranks on NVIDIA GPUs, over NCCL (in CUDA builds).
//
// Bootstrap: the ranks already share the rendezvous store at MASTER_ADDR:MASTER_PORT (the
// control group's); rank 0 makes NCCL's unique id and publishes it there under this group's
// name and the restart count, every rank reads it and joins the communicator on its compute
// backend's GPU. NCCL_* variables (NCCL_SOCKET_IFNAME, NCCL_DEBUG, ...) reach NCCL as they are.
// libnccl.so.2 is loaded with dlopen when the first group is made (the machine's own, matched
// to its driver), never linked into air.
//
// Order: a collective waits (on the GPU, not the host) for an event recorded on the compute
// stream when it is called, runs on the communication backend's stream, and records an event
// that CollectiveWork::Wait makes the compute stream wait for. Calls run in call order on one
// stream, the order NCCL needs on every rank. Sums run in NCCL's ring/tree order in the wire
// dtype (bf16 reductions are summed in bf16 by NCCL): deterministic for a fixed topology and
// world size, not equal to the host groups' fp32 sums in rank order.
//
// Faults: a watchdog thread watches every collective in flight; one not finished within the
// timeout (a rank died or hangs, the network failed), or an asynchronous NCCL error, aborts the
// communicator (so no stream waits forever) and breaks the group: the next Wait, and every
// later one, returns an error naming this rank, the collective, its number and size, and the
// timeout. Destroying the group destroys the communicator (aborts it after an error).
// Thread safety: called from the compute thread; the watchdog is internal.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/parallel/data_group.h"
#include "engine/parallel/dist_env.h"

namespace air::engine::parallel {

struct NcclOptions {
  std::string name = "world";                                  // distinguishes groups in the store
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // each collective, and joining
};

// The ranks of `dist` on their GPUs: `compute` is the rank's model backend, `comm` a second
// backend of the same GPU whose stream the collectives run on. FailedPrecondition when this
// build has no CUDA or libnccl.so.2 cannot be loaded; the store's or NCCL's error otherwise.
Result<std::unique_ptr<DataGroup>> NcclDataGroup(const DistEnv& dist, const Backend& compute,
                                                 std::shared_ptr<Backend> comm,
                                                 const NcclOptions& options = {});

}  // namespace air::engine::parallel
