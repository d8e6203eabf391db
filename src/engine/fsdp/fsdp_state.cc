// Fsdp's access to the training state for checkpoints and figures: the whole fp32 master
// parameters gathered unit by unit (the consolidated HF checkpoint), this rank's master ranges
// (the resumable sharded checkpoint), and the bytes held (see fsdp.h).
#include <fmt/format.h>

#include <algorithm>

#include "engine/fsdp/fsdp.h"

namespace air::engine::fsdp {

Result<View> Fsdp::GatherMaster(int unit, std::unique_ptr<Buffer>& scratch) {
  const Unit& u = units_[static_cast<size_t>(unit)];
  if (strategy_ == ShardingStrategy::kNoShard) return u.master;
  const int64_t padded = u.shard * world_;
  const size_t bytes = static_cast<size_t>(padded) * sizeof(float);
  if (scratch == nullptr || scratch->bytes() < bytes) {
    scratch.reset();
    AIR_ASSIGN_OR_RETURN(scratch, backend_->Allocate(bytes));
  }
  const View all(scratch.get(), 0, DType::kF32, {padded});
  const void* send = u.master.raw();
  void* recv = all.raw();
  const size_t count = static_cast<size_t>(u.shard);
  parallel::ProcessGroup* group = group_;
  AIR_RETURN_IF_ERROR(
      comm_->Run([=] { return group->AllGather(send, recv, count, parallel::CommDType::kF32); }));
  return all.Slice(0, u.numel);
}

Result<std::vector<Tensor>> Fsdp::GatherFullParameters() {
  AIR_RETURN_IF_ERROR(FinishGradients());
  std::vector<Parameter>& params = model_->parameters();
  std::vector<Tensor> out;
  if (rank_ == 0) out.resize(params.size());
  std::unique_ptr<Buffer> scratch;  // one unit at a time
  const std::vector<ParamGroup>& groups = model_->units();
  for (size_t i = 0; i < groups.size(); ++i) {
    AIR_ASSIGN_OR_RETURN(const View full, GatherMaster(static_cast<int>(i), scratch));
    if (rank_ != 0) continue;
    int64_t offset = 0;
    for (const Parameter* p : groups[i].params) {
      out[static_cast<size_t>(p - params.data())] =
          backend_->ToHostTensor(full.Slice(offset, p->numel()).Reshaped(p->shape));
      offset += p->numel();
    }
  }
  return out;
}

Fsdp::ShardRange Fsdp::Range(int unit) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  if (strategy_ == ShardingStrategy::kNoShard) return {0, u.numel, u.numel};
  return {std::min(u.numel, rank_ * u.shard), u.shard, u.numel};
}

bool Fsdp::writes_state() const {
  if (strategy_ == ShardingStrategy::kNoShard) return rank_ == 0;  // replicated: saved once
  return replicas_ == nullptr || replicas_->rank() == 0;
}

std::vector<float> Fsdp::ReadShard(int unit) const {
  const View v = units_[static_cast<size_t>(unit)].master;
  std::vector<float> host(static_cast<size_t>(v.numel()));
  backend_->CopyToHost(host.data(), v);
  return host;
}

Status Fsdp::WriteShard(int unit, const std::vector<float>& values) {
  Unit& u = units_[static_cast<size_t>(unit)];
  AIR_RETURN_IF_ERROR(FinishGradients());
  Record(comm_->Wait(u.gather));
  u.gather = 0;
  AIR_RETURN_IF_ERROR(error_);
  if (static_cast<int64_t>(values.size()) != u.master.numel()) {
    return InvalidArgument(fmt::format("unit {}: a shard of {} values where {} were expected", unit,
                                       values.size(), u.master.numel()));
  }
  backend_->CopyToDevice(u.master, values.data());
  return Status::Ok();
}

FsdpMemory Fsdp::memory() const {
  FsdpMemory m;
  for (const Unit& u : units_) {
    m.parameters += static_cast<int64_t>(u.master_buffer ? u.master.bytes() : 0);
    m.parameters += static_cast<int64_t>(u.resident_buffer ? u.resident.bytes() : 0);
    m.gradients += static_cast<int64_t>(u.grads.bytes());
    m.gather += static_cast<int64_t>(u.reduce_buffer ? u.reduce_send.bytes() : 0);
  }
  for (const Slot& s : slots_) {
    for (const auto* b : {&s.values_buffer, &s.grads_buffer, &s.comm_buffer}) {
      m.gather += *b ? static_cast<int64_t>((*b)->bytes()) : 0;
    }
  }
  return m;
}

}  // namespace air::engine::fsdp
