// The group of one (see process_group.h): rank 0 of 1, every collective a local copy.
#include <cstring>

#include "engine/parallel/process_group.h"

namespace air::engine::parallel {
namespace {

class SingleGroup : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "single"; }
  Status AllReduce(void*, size_t, CommDType, ReduceOp) override { return Status::Ok(); }
  Status AllGather(const void* send, void* recv, size_t count, CommDType dtype) override {
    if (send != recv && count > 0) std::memcpy(recv, send, count * CommDTypeSize(dtype));
    return Status::Ok();
  }
  Status ReduceScatter(const void* send, void* recv, size_t count, CommDType dtype,
                       ReduceOp) override {
    if (send != recv && count > 0) std::memcpy(recv, send, count * CommDTypeSize(dtype));
    return Status::Ok();
  }
  Status Broadcast(void*, size_t, CommDType, int root) override {
    return root == 0 ? Status::Ok() : InvalidArgument("broadcast root of a group of one is 0");
  }
  Status Barrier() override { return Status::Ok(); }
};

}  // namespace

std::unique_ptr<ProcessGroup> SingleProcessGroup() { return std::make_unique<SingleGroup>(); }

}  // namespace air::engine::parallel
