// DataGroup: the collectives FSDP runs on parameters and gradients — Views of the compute
// backend's memory — queued behind the compute work that produced their inputs, and waited for
// only where their results are needed. It is one face of a rank's communicator; the other is
// the control group (ProcessGroup, process_group.h): host memory, small scalars (token counts,
// loss sums, squared norms: exact f64 sums), barriers, over Gloo.
//
// Implementations:
//   HostDataGroup    views of host memory (the CPU backends): the ProcessGroup's collectives on
//                    the CommThread, as FSDP always ran them.
//   StagedDataGroup  views of any device's memory over a host ProcessGroup: each collective
//                    copies its input to page-locked host memory once the compute work before
//                    it is done, runs the host collective, and copies the result back, all on
//                    the CommThread through a second backend of the same device (its own stream).
//                    What several ranks on one GPU use (NCCL refuses two ranks on a device), and
//                    where NCCL is absent.
//   NcclDataGroup    NCCL on a communication stream ordered by events (nccl_data_group.h, in
//                    CUDA builds).
//
// Order: every rank makes the same calls in the same order (FSDP's hooks run in model order);
// each implementation runs them in call order. Sums: Host and Staged reduce bf16 by
// accumulating the ranks' values in fp32 in rank order and rounding once (ProcessGroup's rule):
// deterministic, and the same for any world size with a fixed summation order; NCCL sums in
// the wire dtype in its ring/tree order: deterministic for a fixed topology and world size,
// not equal to rank order. Errors: the first failure (a lost rank, a timeout) breaks the group;
// every later Wait returns it.
// Thread safety: called from the compute thread only; works are waited for on that thread.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/parallel/comm_thread.h"
#include "engine/parallel/process_group.h"

namespace air::engine::parallel {

// One queued collective.
class CollectiveWork {
 public:
  virtual ~CollectiveWork() = default;
  // Once this returns OK, calls queued on the compute backend from now on see the collective's
  // result (the host may or may not have waited: NCCL's stream waits an event). The group's
  // first error otherwise.
  virtual Status Wait() = 0;
};

class DataGroup {
 public:
  virtual ~DataGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;  // "gloo", "gloo-staged", "nccl"

  // recv (size() * n) gets rank r's send (n) at [r*n, (r+1)*n); send may be recv's own slot.
  virtual std::unique_ptr<CollectiveWork> AllGather(const View& send, const View& recv) = 0;
  // send (size() * n) summed over the ranks; rank r keeps slot r in recv (n).
  virtual std::unique_ptr<CollectiveWork> ReduceScatter(const View& send, const View& recv) = 0;
  // data summed over the ranks, in place.
  virtual std::unique_ptr<CollectiveWork> AllReduce(const View& data) = 0;

  // Seconds the communication side was busy, and the compute thread spent waiting on works.
  virtual double busy_seconds() const = 0;
  virtual double wait_seconds() const = 0;
};

// Views of host memory over `group`, on `comm` (both outlive the data group).
std::unique_ptr<DataGroup> HostDataGroup(ProcessGroup& group, CommThread& comm);

// Views of `compute`'s device memory over the host `group`, on `comm`; `transfer` is a second
// backend of the same device that the communication thread copies with (all outlive the data
// group).
std::unique_ptr<DataGroup> StagedDataGroup(ProcessGroup& group, CommThread& comm,
                                           const Backend& compute,
                                           std::shared_ptr<Backend> transfer);

}  // namespace air::engine::parallel
