// FSDP over a CausalLm's units: setup, hooks and the gradient path (see fsdp.h for the
// strategies, slots, ordering and mixed precision). Checkpoint access (gathering, shards) is in
// fsdp_state.cc.
#include "engine/fsdp/fsdp.h"

#include <fmt/format.h>

#include <algorithm>

namespace air::engine::fsdp {
namespace {

using parallel::CommDType;
using parallel::ReduceOp;

constexpr int kRootSlot = 2;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

CommDType CommDTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return CommDType::kBF16;
    case DType::kF16:
      return CommDType::kF16;
    default:
      return CommDType::kF32;
  }
}

Fsdp::Fsdp(CausalLm& model, parallel::ProcessGroup& group, CommThread& comm, FsdpOptions options,
           parallel::ProcessGroup* replicas)
    : model_(&model),
      group_(&group),
      replicas_(replicas),
      comm_(&comm),
      backend_(&model.backend()),
      options_(std::move(options)),
      strategy_(group.size() == 1 && replicas == nullptr ? ShardingStrategy::kNoShard
                                                         : options_.strategy),
      rank_(group.rank()),
      world_(group.size()),
      root_(model.root_unit()) {}

Fsdp::~Fsdp() {
  // Nothing may still write into our buffers once they are gone (errors were reported by the
  // calls that the trainer waited for; here only the waiting matters).
  for (Slot& s : slots_) (void)comm_->Wait(s.reduce);
  for (Unit& u : units_) {
    (void)comm_->Wait(u.gather);
    (void)comm_->Wait(u.allreduce);
  }
  model_->set_unit_hooks({});
}

Result<std::unique_ptr<Fsdp>> Fsdp::Apply(CausalLm& model, parallel::ProcessGroup& group,
                                          CommThread& comm, const FsdpOptions& options,
                                          parallel::ProcessGroup* replicas) {
  if ((options.strategy == ShardingStrategy::kHybridShard) != (replicas != nullptr)) {
    return InvalidArgument("HYBRID_SHARD, and only it, needs the group of replicas");
  }
  if (model.options().compute_dtype != options.precision.param_dtype) {
    return InvalidArgument(fmt::format(
        "FSDP with param_dtype {} needs a model that computes in it (the model computes in {})",
        DTypeName(options.precision.param_dtype), DTypeName(model.options().compute_dtype)));
  }
  for (DType d : {options.precision.param_dtype, options.precision.reduce_dtype}) {
    if (d != DType::kF32 && d != DType::kBF16) {
      return InvalidArgument(fmt::format("FSDP communicates in F32 or BF16, not {}", DTypeName(d)));
    }
  }
  std::unique_ptr<Fsdp> fsdp(new Fsdp(model, group, comm, options, replicas));
  AIR_RETURN_IF_ERROR(fsdp->Setup());
  fsdp->InstallHooks();
  return fsdp;
}

Status Fsdp::Setup() {
  if (strategy_ != ShardingStrategy::kNoShard) {
    for (const Parameter& p : model_->parameters()) {
      if (!p.trainable) {
        return FailedPrecondition(fmt::format(
            "{}: {} is frozen; frozen parameters (LoRA) are sharded by a later engine; use "
            "fsdp_sharding_strategy NO_SHARD for now",
            ShardingStrategyName(strategy_), p.name));
      }
    }
  }
  const std::vector<ParamGroup>& groups = model_->units();
  units_.resize(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    Unit& u = units_[i];
    u.numel = groups[i].numel;
    u.trainable = 0;
    for (const Parameter* p : groups[i].params) u.trainable += p->trainable ? p->numel() : 0;
    u.shard = strategy_ == ShardingStrategy::kNoShard
                  ? u.numel
                  : std::max<int64_t>(1, CeilDiv(u.numel, world_));
    u.slot = static_cast<int>(i) == root_ ? kRootSlot : static_cast<int>(i) % 2;
  }
  if (strategy_ != ShardingStrategy::kNoShard) AIR_RETURN_IF_ERROR(SetupSlots());
  // Each unit in turn: loaded (when deferred), copied into this rank's storage, the model's copy
  // dropped — one unit at a time is ever whole here.
  for (size_t i = 0; i < groups.size(); ++i) AIR_RETURN_IF_ERROR(SetupUnit(static_cast<int>(i)));
  options_.load_unit = nullptr;  // what it reads (the weight files) is gone after Apply
  SetupOptimizerViews();
  return Status::Ok();
}

Status Fsdp::SetupUnit(int unit) {
  if (options_.load_unit) AIR_RETURN_IF_ERROR(options_.load_unit(unit));
  Unit& u = units_[static_cast<size_t>(unit)];
  const View full = model_->units()[static_cast<size_t>(unit)].values_view;  // F32, n
  const Backend& b = *backend_;
  if (strategy_ == ShardingStrategy::kNoShard) {
    AIR_ASSIGN_OR_RETURN(u.master_buffer, b.AllocateView(DType::kF32, {u.numel}, &u.master));
    b.Copy(u.master, full.Flat());
    if (param_dtype() == DType::kF32) {
      u.resident = u.master;
    } else {
      AIR_ASSIGN_OR_RETURN(u.resident_buffer,
                           b.AllocateView(param_dtype(), {u.numel}, &u.resident));
      b.Convert(u.master, u.resident);
    }
    AIR_ASSIGN_OR_RETURN(u.grad_buffer, b.AllocateView(DType::kF32, {u.trainable}, &u.grads));
    b.Zero(u.grads);
    if (world_ > 1 && reduce_dtype() != DType::kF32) {
      AIR_ASSIGN_OR_RETURN(u.reduce_buffer,
                           b.AllocateView(reduce_dtype(), {u.trainable}, &u.reduce_send));
    }
    model_->ReleaseUnitStorage(unit);
    model_->BindUnit(unit, u.resident, u.grads);
    return Status::Ok();
  }
  const int64_t begin = std::min(u.numel, rank_ * u.shard);
  const int64_t owned = std::min(u.shard, u.numel - begin);
  if (strategy_ == ShardingStrategy::kShardGradOp) {
    AIR_ASSIGN_OR_RETURN(u.resident_buffer,
                         b.AllocateView(param_dtype(), {u.shard * world_}, &u.resident));
    b.Zero(u.resident);
    b.Convert(full.Flat(), u.resident.Slice(0, u.numel));
  }
  if (strategy_ == ShardingStrategy::kShardGradOp && param_dtype() == DType::kF32) {
    u.master = u.resident.Slice(rank_ * u.shard, u.shard);  // the resident copy is the master
  } else {
    AIR_ASSIGN_OR_RETURN(u.master_buffer, b.AllocateView(DType::kF32, {u.shard}, &u.master));
    b.Zero(u.master);
    if (owned > 0) b.Copy(u.master.Slice(0, owned), full.Flat().Slice(begin, owned));
  }
  AIR_ASSIGN_OR_RETURN(u.grad_buffer, b.AllocateView(DType::kF32, {u.shard}, &u.grads));
  b.Zero(u.grads);
  model_->ReleaseUnitStorage(unit);
  // Until a hook binds it, point the unit somewhere valid (stale values, no gradients).
  model_->BindUnit(unit, Padded(unit).Slice(0, u.numel), View());
  return Status::Ok();
}

Status Fsdp::SetupSlots() {
  int64_t layer_padded = 0, layer_shard = 0;
  for (size_t i = 0; i < units_.size(); ++i) {
    if (static_cast<int>(i) == root_) continue;
    layer_padded = std::max(layer_padded, units_[i].shard * world_);
    layer_shard = std::max(layer_shard, units_[i].shard);
  }
  const Backend& b = *backend_;
  slots_.resize(3);
  for (int s = 0; s < 3; ++s) {
    const int64_t padded = s == kRootSlot ? units_[root_].shard * world_ : layer_padded;
    const int64_t shard = s == kRootSlot ? units_[root_].shard : layer_shard;
    if (padded == 0) continue;  // a model without decoder layers
    Slot& slot = slots_[static_cast<size_t>(s)];
    if (gathers()) {
      AIR_ASSIGN_OR_RETURN(slot.values_buffer,
                           b.AllocateView(param_dtype(), {padded}, &slot.values));
      b.Zero(slot.values);
    }
    AIR_ASSIGN_OR_RETURN(slot.grads_buffer, b.AllocateView(DType::kF32, {padded}, &slot.grads));
    b.Zero(slot.grads);
    // One buffer for the conversions the collectives need: [gather_send | reduce_send | reduced].
    const bool convert_gather = gathers() && param_dtype() != DType::kF32;
    const bool convert_reduce = reduce_dtype() != DType::kF32;
    const size_t gather_bytes =
        convert_gather ? static_cast<size_t>(shard) * DTypeSize(param_dtype()) : 0;
    const size_t send_bytes =
        convert_reduce ? static_cast<size_t>(padded) * DTypeSize(reduce_dtype()) : 0;
    const size_t align = 64;
    const size_t send_at = (gather_bytes + align - 1) / align * align;
    const size_t reduced_at = send_at + (send_bytes + align - 1) / align * align;
    const size_t total = reduced_at + static_cast<size_t>(shard) * DTypeSize(reduce_dtype());
    AIR_ASSIGN_OR_RETURN(slot.comm_buffer, b.Allocate(total));
    if (convert_gather) slot.gather_send = View(slot.comm_buffer.get(), 0, param_dtype(), {shard});
    if (convert_reduce) {
      slot.reduce_send = View(slot.comm_buffer.get(), send_at, reduce_dtype(), {padded});
    }
    slot.reduced = View(slot.comm_buffer.get(), reduced_at, reduce_dtype(), {shard});
    b.Zero(slot.reduced);
  }
  return Status::Ok();
}

void Fsdp::SetupOptimizerViews() {
  const std::vector<ParamGroup>& groups = model_->units();
  for (size_t i = 0; i < groups.size(); ++i) {
    const Unit& u = units_[i];
    const bool whole = strategy_ == ShardingStrategy::kNoShard;
    const int64_t lo = whole ? 0 : std::min(u.numel, rank_ * u.shard);
    const int64_t hi = whole ? u.numel : std::min(u.numel, lo + u.shard);
    int64_t offset = 0, grad_offset = 0;  // NO_SHARD's gradients hold the trainable ones only
    for (const Parameter* p : groups[i].params) {
      const int64_t start = std::max(offset, lo);
      const int64_t end = std::min(offset + p->numel(), hi);
      if (p->trainable && end > start) {
        train::ParamView v;
        v.name = p->name;
        v.numel = end - start;
        v.shape = whole ? p->shape : Shape{v.numel};
        v.decay = p->decay;
        v.value = u.master.Slice(start - lo, v.numel);
        v.grad = u.grads.Slice(whole ? grad_offset : start - lo, v.numel);
        views_.push_back(std::move(v));
        view_places_.push_back({static_cast<int>(i), start});
      }
      offset += p->numel();
      grad_offset += p->trainable ? p->numel() : 0;
    }
  }
}

void Fsdp::InstallHooks() {
  UnitHooks hooks;
  hooks.before_forward = [this](int u) { BeforeForward(u); };
  hooks.before_backward = [this](int u) { BeforeBackward(u); };
  hooks.after_backward = [this](int u) { AfterBackward(u); };
  model_->set_unit_hooks(std::move(hooks));
}

View Fsdp::SlotValues(int unit) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  return slots_[static_cast<size_t>(u.slot)].values.Slice(0, u.shard * world_);
}

View Fsdp::SlotGrads(int unit) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  return slots_[static_cast<size_t>(u.slot)].grads.Slice(0, u.shard * world_);
}

View Fsdp::Padded(int unit) const {
  if (gathers()) return SlotValues(unit);
  return units_[static_cast<size_t>(unit)].resident;
}

void Fsdp::Record(const Status& s) {
  if (!s.ok() && error_.ok()) error_ = s;
}

void Fsdp::StartGather(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  Slot& slot = slots_[static_cast<size_t>(u.slot)];
  if (slot.gathered_unit == unit) return;  // already there (or on its way)
  slot.gathered_unit = unit;
  View send = u.master;
  if (param_dtype() != DType::kF32) {  // the fp32 master shard travels in param_dtype
    send = slot.gather_send.Slice(0, u.shard);
    backend_->Convert(u.master, send);
  }
  const void* send_data = send.raw();
  void* recv = SlotValues(unit).raw();
  const size_t count = static_cast<size_t>(u.shard);
  const CommDType dtype = CommDTypeOf(param_dtype());
  parallel::ProcessGroup* group = group_;
  u.gather = comm_->Submit([=] { return group->AllGather(send_data, recv, count, dtype); });
}

void Fsdp::WaitGather(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  if (gathers()) StartGather(unit);
  Record(comm_->Wait(u.gather));
  u.gather = 0;
}

void Fsdp::StartReduce(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  Slot& slot = slots_[static_cast<size_t>(u.slot)];
  View send = SlotGrads(unit);
  if (reduce_dtype() != DType::kF32) {  // gradients travel in reduce_dtype
    const View converted = slot.reduce_send.Slice(0, u.shard * world_);
    backend_->Convert(send, converted);
    send = converted;
  }
  const void* send_data = send.raw();
  void* recv = slot.reduced.Slice(0, u.shard).raw();
  const size_t count = static_cast<size_t>(u.shard);
  const CommDType dtype = CommDTypeOf(reduce_dtype());
  parallel::ProcessGroup* group = group_;
  parallel::ProcessGroup* replicas =
      replicas_ != nullptr && replicas_->size() > 1 ? replicas_ : nullptr;
  slot.reduce_unit = unit;
  slot.reduce = comm_->Submit([=]() -> Status {
    AIR_RETURN_IF_ERROR(group->ReduceScatter(send_data, recv, count, dtype, ReduceOp::kSum));
    // HYBRID_SHARD: the node's shard sum, summed over the nodes.
    if (replicas != nullptr) {
      AIR_RETURN_IF_ERROR(replicas->AllReduce(recv, count, dtype, ReduceOp::kSum));
    }
    return Status::Ok();
  });
}

void Fsdp::FinishReduce(Slot& slot) {
  if (slot.reduce_unit < 0) return;
  Record(comm_->Wait(slot.reduce));
  Unit& u = units_[static_cast<size_t>(slot.reduce_unit)];
  backend_->AddInPlace(u.grads, slot.reduced.Slice(0, u.shard));  // fp32 accumulation
  slot.reduce = 0;
  slot.reduce_unit = -1;
}

void Fsdp::PrepareGrads(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  Slot& slot = slots_[static_cast<size_t>(u.slot)];
  FinishReduce(slot);  // the slot's gradient memory is about to be reused
  const View grads = SlotGrads(unit);
  backend_->Zero(grads);
  model_->BindUnit(unit, Padded(unit).Slice(0, u.numel), grads.Slice(0, u.numel));
}

void Fsdp::BeforeForward(int unit) {
  const Unit& u = units_[static_cast<size_t>(unit)];
  switch (strategy_) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kHybridShard: {
      WaitGather(unit);
      if (unit == root_) {
        PrepareGrads(unit);  // the head's gradient is written during the forward
      } else {
        model_->BindUnit(unit, SlotValues(unit).Slice(0, u.numel), View());
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
  if (u.trainable == 0) return;  // nothing trainable in this unit
  View data = u.grads;
  if (reduce_dtype() != DType::kF32) {
    backend_->Convert(u.grads, u.reduce_send);
    data = u.reduce_send;
  }
  void* ptr = data.raw();
  const size_t count = static_cast<size_t>(u.trainable);
  const CommDType dtype = CommDTypeOf(reduce_dtype());
  parallel::ProcessGroup* group = group_;
  u.allreduce = comm_->Submit([=] { return group->AllReduce(ptr, count, dtype, ReduceOp::kSum); });
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
  for (Unit& u : units_) backend_->Zero(u.grads);
  return error_;
}

Status Fsdp::FinishGradients() {
  for (Slot& s : slots_) FinishReduce(s);
  for (Unit& u : units_) {
    if (u.allreduce == 0) continue;
    Record(comm_->Wait(u.allreduce));
    u.allreduce = 0;
    // The all-reduced sum, in reduce_dtype, replaces this rank's fp32 gradient.
    if (reduce_dtype() != DType::kF32) backend_->Convert(u.reduce_send, u.grads);
  }
  return error_;
}

Status Fsdp::AfterOptimizerStep() {
  switch (strategy_) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kHybridShard:
      for (Slot& s : slots_) s.gathered_unit = -1;  // every gathered copy is stale now
      break;
    case ShardingStrategy::kShardGradOp:
      for (Unit& u : units_) {
        const View mine = u.resident.Slice(rank_ * u.shard, u.shard);
        if (param_dtype() != DType::kF32) backend_->Convert(u.master, mine);
        void* all = u.resident.raw();
        const void* send = mine.raw();
        const size_t count = static_cast<size_t>(u.shard);
        const CommDType dtype = CommDTypeOf(param_dtype());
        parallel::ProcessGroup* group = group_;
        u.gather = comm_->Submit([=] { return group->AllGather(send, all, count, dtype); });
      }
      break;
    case ShardingStrategy::kNoShard:
      if (param_dtype() != DType::kF32) {
        for (Unit& u : units_) backend_->Convert(u.master, u.resident);
      }
      break;
  }
  return error_;
}

}  // namespace air::engine::fsdp
