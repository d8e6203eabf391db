// FSDP's hooks and gradient path: gathering units before their forward and backward, binding
// gradient slots, reduce-scattering (or all-reducing) gradients after each unit's backward, and
// refreshing the compute copies after the optimizer step (see fsdp.h).
#include <fmt/format.h>

#include <algorithm>

#include "engine/fsdp/fsdp.h"

namespace air::engine::fsdp {

using parallel::CommDType;
using parallel::ReduceOp;

void Fsdp::InstallHooks() {
  UnitHooks hooks;
  hooks.before_forward = [this](int u) { BeforeForward(u); };
  hooks.before_backward = [this](int u) { BeforeBackward(u); };
  hooks.after_backward = [this](int u) { AfterBackward(u); };
  model_->set_unit_hooks(std::move(hooks));
}

void Fsdp::StartGather(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  Slot& slot = slots_[static_cast<size_t>(u.slot)];
  if (slot.gathered_unit == unit) return;  // already there (or on its way)
  slot.gathered_unit = unit;
  View send = u.master;
  if (param_dtype() != state_dtype() && u.shard > 0) {  // the master travels in param_dtype
    send = slot.gather_send.Slice(0, u.shard);
    backend_->Convert(u.master, send);
  }
  // The frozen segment as it is stored, then the trainable one.
  if (u.frozen_shard > 0) u.gather.push_back(data_->AllGather(u.frozen, SlotFrozen(unit)));
  if (u.shard > 0) u.gather.push_back(data_->AllGather(send, SlotValues(unit)));
}

void Fsdp::WaitGather(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  if (gathers()) StartGather(unit);
  WaitAll(u.gather);
}

void Fsdp::StartReduce(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  if (u.shard == 0) return;  // nothing trainable in this unit
  Slot& slot = slots_[static_cast<size_t>(u.slot)];
  View send = SlotGrads(unit);
  if (reduce_dtype() != state_dtype()) {  // gradients travel in reduce_dtype
    const View converted = slot.reduce_send.Slice(0, u.shard * world_);
    backend_->Convert(send, converted);
    send = converted;
  }
  const View recv = slot.reduced.Slice(0, u.shard);
  slot.reduce_unit = unit;
  slot.reduce.push_back(data_->ReduceScatter(send, recv));
  // HYBRID_SHARD: the node's shard sum, summed over the nodes.
  if (replica_data_ != nullptr && replica_data_->size() > 1) {
    slot.reduce.push_back(replica_data_->AllReduce(recv));
  }
}

void Fsdp::FinishReduce(Slot& slot) {
  if (slot.reduce_unit < 0) return;
  WaitAll(slot.reduce);
  Unit& u = units_[static_cast<size_t>(slot.reduce_unit)];
  backend_->AddInPlace(u.grads, slot.reduced.Slice(0, u.shard));  // summed in fp32
  slot.reduce_unit = -1;
}

void Fsdp::PrepareGrads(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  Slot& slot = slots_[static_cast<size_t>(u.slot)];
  FinishReduce(slot);  // the slot's gradient memory is about to be reused
  const View grads = SlotGrads(unit);
  model_->ZeroUnitGradients(unit, grads);  // the overwritten ones marked unwritten instead
  Bind(unit, grads);
}

void Fsdp::BeforeForward(int unit) {
  switch (strategy_) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kHybridShard: {
      WaitGather(unit);
      if (unit == root_) {
        PrepareGrads(unit);  // the head's gradient is written during the forward
      } else {
        Bind(unit, View());
      }
      const int next = unit == root_ ? 0 : unit + 1;
      if (next < root_) StartGather(next);  // prefetch the next layer
      break;
    }
    case ShardingStrategy::kShardGradOp:
      WaitGather(unit);  // the post-step all-gather of this unit
      if (unit == root_) PrepareGrads(unit);
      break;
    default:
      break;
  }
}

void Fsdp::BeforeBackward(int unit) {
  switch (strategy_) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kHybridShard: {
      WaitGather(unit);
      if (unit != root_) PrepareGrads(unit);  // the root's were bound in its forward
      const int next = unit == root_ ? root_ - 1 : unit - 1;
      if (next >= 0) StartGather(next);  // prefetch the layer below
      break;
    }
    case ShardingStrategy::kShardGradOp:
      if (unit != root_) PrepareGrads(unit);
      break;
    default:
      break;
  }
}

void Fsdp::AfterBackward(int unit) {
  if (strategy_ != ShardingStrategy::kNoShard) {
    StartReduce(unit);
    return;
  }
  if (sync_gradients_ && world_ > 1) AllReduceGrads(unit);
}

void Fsdp::AllReduceGrads(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  if (u.numel == 0) return;  // nothing trainable in this unit
  View data = u.grads;
  if (reduce_dtype() != state_dtype()) {
    backend_->Convert(u.grads, u.reduce_send);
    data = u.reduce_send;
  }
  u.allreduce.push_back(data_->AllReduce(data));
}

Result<double> Fsdp::SumOverShards(double local) const {
  double total = local;
  parallel::ProcessGroup* group = group_;
  AIR_RETURN_IF_ERROR(
      comm_->Run([&] { return group->AllReduce(&total, 1, CommDType::kF64, ReduceOp::kSum); }));
  return total;
}

Status Fsdp::ZeroGrads() {
  AIR_RETURN_IF_ERROR(FinishGradients());
  for (size_t i = 0; i < units_.size(); ++i) {
    const Unit& u = units_[i];
    if (u.grads.empty()) continue;
    // NO_SHARD's gradients are the model's own (bound at setup); the others are shards the
    // reduced sums are added into.
    if (strategy_ == ShardingStrategy::kNoShard) {
      model_->ZeroUnitGradients(static_cast<int>(i), u.grads);
    } else {
      backend_->Zero(u.grads);
    }
  }
  return error_;
}

Status Fsdp::FinishGradients() {
  for (Slot& s : slots_) FinishReduce(s);
  for (Unit& u : units_) {
    if (u.allreduce.empty()) continue;
    WaitAll(u.allreduce);
    // The all-reduced sum, in reduce_dtype, replaces this rank's gradient.
    if (reduce_dtype() != state_dtype()) backend_->Convert(u.reduce_send, u.grads);
  }
  return error_;
}

Status Fsdp::AfterOptimizerStep() {
  if (strategy_ == ShardingStrategy::kNoShard) return error_;  // the optimizer wrote the copies
  return RefreshComputeCopies();
}

Status Fsdp::RefreshComputeCopies() {
  switch (strategy_) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kHybridShard:
      for (Slot& s : slots_) s.gathered_unit = -1;  // every gathered copy is stale now
      break;
    case ShardingStrategy::kShardGradOp:
      for (Unit& u : units_) {
        if (u.shard == 0) continue;  // a frozen unit never changes
        const View mine = u.resident.Slice(rank_ * u.shard, u.shard);
        if (param_dtype() != state_dtype()) backend_->Convert(u.master, mine);
        u.gather.push_back(data_->AllGather(mine, u.resident));  // in place
      }
      break;
    case ShardingStrategy::kNoShard:
      if (param_dtype() != state_dtype()) {
        for (Unit& u : units_) {
          if (u.numel > 0) backend_->Convert(u.master, u.resident);
        }
      }
      break;
  }
  return error_;
}

}  // namespace air::engine::fsdp
