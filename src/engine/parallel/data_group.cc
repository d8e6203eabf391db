// The host and staged data groups (see data_group.h).
#include "engine/parallel/data_group.h"

#include <fmt/format.h>

#include "engine/check.h"

namespace air::engine::parallel {

namespace {

// A collective queued on the communication thread.
class TicketWork : public CollectiveWork {
 public:
  TicketWork(CommThread& comm, CommThread::Ticket ticket) : comm_(comm), ticket_(ticket) {}
  Status Wait() override { return comm_.Wait(ticket_); }

 private:
  CommThread& comm_;
  CommThread::Ticket ticket_;
};

void CheckSizes(const char* what, int64_t have, int64_t need) {
  AIR_ENGINE_CHECK(have >= need, what);
}

// ---- host memory ------------------------------------------------------------------------------

class HostGroup : public DataGroup {
 public:
  HostGroup(ProcessGroup& group, CommThread& comm) : group_(group), comm_(comm) {}

  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  const char* name() const override { return group_.backend(); }

  std::unique_ptr<CollectiveWork> AllGather(const View& send, const View& recv) override {
    Host(send);
    Host(recv);
    const size_t n = static_cast<size_t>(send.numel());
    CheckSizes("AllGather: recv holds fewer than size() * send", recv.numel(),
               send.numel() * size());
    const void* in = send.raw();
    void* out = recv.raw();
    const CommDType dtype = CommDTypeOf(send.dtype());
    ProcessGroup* group = &group_;
    return Queue([=] { return group->AllGather(in, out, n, dtype); });
  }
  std::unique_ptr<CollectiveWork> ReduceScatter(const View& send, const View& recv) override {
    Host(send);
    Host(recv);
    CheckSizes("ReduceScatter: send holds fewer than size() * recv", send.numel(),
               recv.numel() * size());
    const size_t n = static_cast<size_t>(recv.numel());
    const void* in = send.raw();
    void* out = recv.raw();
    const CommDType dtype = CommDTypeOf(send.dtype());
    ProcessGroup* group = &group_;
    return Queue([=] { return group->ReduceScatter(in, out, n, dtype, ReduceOp::kSum); });
  }
  std::unique_ptr<CollectiveWork> AllReduce(const View& data) override {
    Host(data);
    void* ptr = data.raw();
    const size_t n = static_cast<size_t>(data.numel());
    const CommDType dtype = CommDTypeOf(data.dtype());
    ProcessGroup* group = &group_;
    return Queue([=] { return group->AllReduce(ptr, n, dtype, ReduceOp::kSum); });
  }
  double busy_seconds() const override { return comm_.busy_seconds(); }
  double wait_seconds() const override { return comm_.wait_seconds(); }

 private:
  static void Host(const View& v) {
    AIR_ENGINE_CHECK(v.empty() || v.device().type == DeviceType::kCpu,
                     "a host data group was given device memory (use a staged or NCCL group)");
  }
  std::unique_ptr<CollectiveWork> Queue(std::function<Status()> task) {
    return std::make_unique<TicketWork>(comm_, comm_.Submit(std::move(task)));
  }

  ProcessGroup& group_;
  CommThread& comm_;
};

// ---- device memory, staged through the host ---------------------------------------------------

class StagedGroup : public DataGroup {
 public:
  StagedGroup(ProcessGroup& group, CommThread& comm, const Backend& compute,
              std::shared_ptr<Backend> transfer)
      : group_(group), comm_(comm), compute_(compute), transfer_(std::move(transfer)) {
    AIR_ENGINE_CHECK(transfer_ != nullptr && transfer_->device() == compute_.device(),
                     "a staged data group copies with a backend of the compute device");
  }

  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  const char* name() const override { return "gloo-staged"; }

  std::unique_ptr<CollectiveWork> AllGather(const View& send, const View& recv) override {
    CheckSizes("AllGather: recv holds fewer than size() * send", recv.numel(),
               send.numel() * size());
    const View out = recv.Flat().Slice(0, send.numel() * size());
    return Queue(send, out, [this, send, out](void* in_host, void* out_host) {
      return group_.AllGather(in_host, out_host, static_cast<size_t>(send.numel()),
                              CommDTypeOf(send.dtype()));
    });
  }
  std::unique_ptr<CollectiveWork> ReduceScatter(const View& send, const View& recv) override {
    CheckSizes("ReduceScatter: send holds fewer than size() * recv", send.numel(),
               recv.numel() * size());
    const View in = send.Flat().Slice(0, recv.numel() * size());
    return Queue(in, recv, [this, recv, in](void* in_host, void* out_host) {
      return group_.ReduceScatter(in_host, out_host, static_cast<size_t>(recv.numel()),
                                  CommDTypeOf(in.dtype()), ReduceOp::kSum);
    });
  }
  std::unique_ptr<CollectiveWork> AllReduce(const View& data) override {
    return Queue(data, data, [this, data](void* in_host, void* out_host) {
      const size_t n = static_cast<size_t>(data.numel());
      std::memcpy(out_host, in_host, data.bytes());
      return group_.AllReduce(out_host, n, CommDTypeOf(data.dtype()), ReduceOp::kSum);
    });
  }
  double busy_seconds() const override { return comm_.busy_seconds(); }
  double wait_seconds() const override { return comm_.wait_seconds(); }

 private:
  using HostCollective = std::function<Status(void* in_host, void* out_host)>;

  // On the communication thread, once the compute work queued so far is done: `in` to the host,
  // the host collective, the result back into `out`; the transfer stream drained before the
  // task ends, so the staging buffers are free for the next task and `out` holds the result
  // when the ticket is done.
  std::unique_ptr<CollectiveWork> Queue(const View& in, const View& out, HostCollective run) {
    std::shared_ptr<Event> ready = compute_.RecordEvent();
    const CommThread::Ticket ticket = comm_.Submit([this, ready, in, out, run]() -> Status {
      transfer_->WaitEvent(*ready);
      AIR_RETURN_IF_ERROR(Reserve(in_host_, in.bytes()));
      AIR_RETURN_IF_ERROR(Reserve(out_host_, out.bytes()));
      transfer_->CopyToHostAsync(*in_host_, 0, in);
      transfer_->Synchronize();
      AIR_RETURN_IF_ERROR(run(in_host_->data(), out_host_->data()));
      transfer_->CopyToDeviceAsync(out, *out_host_, 0);
      transfer_->Synchronize();
      return Status::Ok();
    });
    return std::make_unique<TicketWork>(comm_, ticket);
  }
  Status Reserve(std::unique_ptr<HostBuffer>& buffer, size_t bytes) {
    if (buffer != nullptr && buffer->bytes() >= bytes) return Status::Ok();
    buffer.reset();
    AIR_ASSIGN_OR_RETURN(buffer, transfer_->AllocateHost(bytes));
    return Status::Ok();
  }

  ProcessGroup& group_;
  CommThread& comm_;
  const Backend& compute_;
  std::shared_ptr<Backend> transfer_;
  std::unique_ptr<HostBuffer> in_host_, out_host_;  // the communication thread's
};

}  // namespace

std::unique_ptr<DataGroup> HostDataGroup(ProcessGroup& group, CommThread& comm) {
  return std::make_unique<HostGroup>(group, comm);
}

std::unique_ptr<DataGroup> StagedDataGroup(ProcessGroup& group, CommThread& comm,
                                           const Backend& compute,
                                           std::shared_ptr<Backend> transfer) {
  return std::make_unique<StagedGroup>(group, comm, compute, std::move(transfer));
}

}  // namespace air::engine::parallel
