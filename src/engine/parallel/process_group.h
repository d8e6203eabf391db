// ProcessGroup: the collectives the trainer needs (all-reduce, all-gather, reduce-scatter,
// broadcast, barrier) over typed buffers given as a raw pointer, an element count and a
// CommDType, so that any tensor storage — host vectors today, the engine core's backend buffers
// next — plugs in without a copy. One implementation per transport: GlooProcessGroup (CPU, TCP)
// now; an NCCL one slots in beside it behind this interface.
//
// Reductions in bf16/f16 (FSDP's reduce_dtype) move the half-precision values and accumulate
// the ranks' contributions in fp32, in rank order, rounding the result once.
//
// Every call is collective: all ranks of the group make the same calls in the same order with
// the same counts. A call that cannot finish (a peer died or stopped answering) returns an
// error naming the lost rank within the group's timeout, and the group is then broken: later
// calls fail at once with the same error.
// Thread safety: one thread calls a group at a time (FSDP's communication thread owns it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "engine/dtype.h"

namespace air::engine::parallel {

enum class CommDType { kF32, kF64, kBF16, kF16, kI32, kI64 };
enum class ReduceOp { kSum, kMax, kMin };

size_t CommDTypeSize(CommDType dtype);
// The collective dtype of an engine dtype (F32, BF16, F16, F64, I32).
CommDType CommDTypeOf(DType dtype);
const char* CommDTypeName(CommDType dtype);  // "f32", "bf16", ...

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;  // "gloo"

  // data[count] on every rank becomes the element-wise reduction over ranks.
  virtual Status AllReduce(void* data, size_t count, CommDType dtype, ReduceOp op) = 0;
  // recv[size() * count] gets rank r's send[count] at offset r * count. send may alias recv's
  // own slot (in place).
  virtual Status AllGather(const void* send, void* recv, size_t count, CommDType dtype) = 0;
  // send[size() * count] is reduced over ranks; rank r keeps slot r in recv[count].
  virtual Status ReduceScatter(const void* send, void* recv, size_t count, CommDType dtype,
                               ReduceOp op) = 0;
  // data[count] on every rank becomes root's.
  virtual Status Broadcast(void* data, size_t count, CommDType dtype, int root) = 0;
  virtual Status Barrier() = 0;
};

// The group of one process (rank 0 of 1): collectives are copies, nothing is sent. It is what
// one process trains with, so a single process and a sharded run take the same code path.
std::unique_ptr<ProcessGroup> SingleProcessGroup();

}  // namespace air::engine::parallel
