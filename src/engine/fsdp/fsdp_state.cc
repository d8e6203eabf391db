// Fsdp's access to the training state for checkpoints and figures: the whole parameters gathered
// unit by unit (the consolidated HF checkpoint, or a PEFT adapter: the trainable ones only), this
// rank's master ranges (the resumable sharded checkpoint), and the bytes held (see fsdp.h).
#include <fmt/format.h>

#include <algorithm>

#include "engine/fsdp/fsdp.h"

namespace air::engine::fsdp {

namespace {

// All-gathers `shard` elements of `send` from every rank into `scratch` (grown to fit) and
// returns the first `numel` of them.
Result<View> GatherInto(const Backend& backend, parallel::DataGroup& data, const View& send,
                        int64_t shard, int64_t numel, int world, std::unique_ptr<Buffer>& scratch) {
  const int64_t padded = shard * world;
  const size_t bytes = static_cast<size_t>(padded) * DTypeSize(send.dtype());
  if (scratch == nullptr || scratch->bytes() < bytes) {
    scratch.reset();
    AIR_ASSIGN_OR_RETURN(scratch, backend.Allocate(bytes));
  }
  const View all(scratch.get(), 0, send.dtype(), {padded});
  AIR_RETURN_IF_ERROR(data.AllGather(send.Slice(0, shard), all)->Wait());
  return all.Slice(0, numel);
}

}  // namespace

Result<View> Fsdp::GatherMaster(int unit, std::unique_ptr<Buffer>& scratch) {
  const Unit& u = units_[static_cast<size_t>(unit)];
  if (strategy_ == ShardingStrategy::kNoShard || u.numel == 0) return u.master;
  return GatherInto(*backend_, *data_, u.master, u.shard, u.numel, world_, scratch);
}

Result<View> Fsdp::GatherFrozen(int unit, std::unique_ptr<Buffer>& scratch) {
  const Unit& u = units_[static_cast<size_t>(unit)];
  if (!gathers() || u.frozen_numel == 0) return u.frozen;
  return GatherInto(*backend_, *data_, u.frozen, u.frozen_shard, u.frozen_numel, world_, scratch);
}

Result<std::vector<Tensor>> Fsdp::GatherFullParameters(bool trainable_only) {
  AIR_RETURN_IF_ERROR(FinishGradients());
  std::vector<Parameter>& params = model_->parameters();
  std::vector<Tensor> out;
  if (rank_ == 0) out.resize(params.size());
  std::unique_ptr<Buffer> scratch;  // one unit at a time
  const std::vector<ParamGroup>& groups = model_->units();
  for (size_t i = 0; i < groups.size(); ++i) {
    const int unit = static_cast<int>(i);
    AIR_ASSIGN_OR_RETURN(const View trainable, GatherMaster(unit, scratch));
    if (rank_ == 0) {
      int64_t offset = 0;
      for (const Parameter* p : groups[i].params) {
        if (!p->trainable) continue;
        out[static_cast<size_t>(p - params.data())] =
            backend_->ToHostTensor(trainable.Slice(offset, p->numel()).Reshaped(p->shape));
        offset += p->numel();
      }
    }
    if (trainable_only) continue;
    AIR_ASSIGN_OR_RETURN(const View frozen, GatherFrozen(unit, scratch));
    if (rank_ != 0) continue;
    int64_t offset = 0;
    for (const Parameter* p : groups[i].params) {
      if (p->trainable) continue;
      out[static_cast<size_t>(p - params.data())] =
          backend_->ToHostTensor(frozen.Slice(offset, p->numel()).Reshaped(p->shape));
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
  const Tensor host = backend_->ToHostTensor(units_[static_cast<size_t>(unit)].master);
  return std::vector<float>(host.values().begin(), host.values().end());  // widened: exact
}

Status Fsdp::WriteShard(int unit, const std::vector<float>& values) {
  Unit& u = units_[static_cast<size_t>(unit)];
  AIR_RETURN_IF_ERROR(FinishGradients());
  WaitAll(u.gather);
  AIR_RETURN_IF_ERROR(error_);
  if (static_cast<int64_t>(values.size()) != u.master.numel()) {
    return InvalidArgument(fmt::format("unit {}: a shard of {} values where {} were expected", unit,
                                       values.size(), u.master.numel()));
  }
  backend_->FromHostTensor(u.master, values.data());  // a bf16 master's values round-trip
  return Status::Ok();
}

FsdpMemory Fsdp::memory() const {
  FsdpMemory m;
  for (const Unit& u : units_) {
    m.parameters += static_cast<int64_t>(u.master_buffer ? u.master.bytes() : 0);
    m.parameters += static_cast<int64_t>(u.resident_buffer ? u.resident.bytes() : 0);
    m.frozen += static_cast<int64_t>(u.frozen_buffer ? u.frozen.bytes() : 0);
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
