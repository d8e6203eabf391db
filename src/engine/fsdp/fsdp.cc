// FSDP over a LlamaModel's units (see fsdp.h for the strategies, slots and ordering).
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

Fsdp::Fsdp(LlamaModel& model, parallel::ProcessGroup& group, CommThread& comm, FsdpOptions options,
           parallel::ProcessGroup* replicas)
    : model_(&model),
      group_(&group),
      replicas_(replicas),
      comm_(&comm),
      backend_(&model.backend()),
      options_(options),
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

Result<std::unique_ptr<Fsdp>> Fsdp::Apply(LlamaModel& model, parallel::ProcessGroup& group,
                                          CommThread& comm, const FsdpOptions& options,
                                          parallel::ProcessGroup* replicas) {
  if ((options.strategy == ShardingStrategy::kHybridShard) != (replicas != nullptr)) {
    return InvalidArgument("HYBRID_SHARD, and only it, needs the group of replicas");
  }
  std::unique_ptr<Fsdp> fsdp(new Fsdp(model, group, comm, options, replicas));
  AIR_RETURN_IF_ERROR(fsdp->Setup());
  fsdp->InstallHooks();
  return fsdp;
}

Status Fsdp::Setup() {
  const ShardingStrategy strategy = options_.strategy;
  const bool sharded = strategy != ShardingStrategy::kNoShard;
  std::vector<ParamGroup>& groups = model_->units();
  if (sharded) {
    for (const Parameter& p : model_->parameters()) {
      if (!p.trainable) {
        return FailedPrecondition(fmt::format(
            "{}: {} is frozen; frozen parameters (LoRA) are sharded by a later engine; use "
            "fsdp_sharding_strategy NO_SHARD for now",
            ShardingStrategyName(strategy), p.name));
      }
    }
  } else {
    if (options_.load_unit) {  // every rank holds the whole model anyway
      for (size_t i = 0; i < groups.size(); ++i) {
        AIR_RETURN_IF_ERROR(options_.load_unit(static_cast<int>(i)));
      }
    }
    AIR_RETURN_IF_ERROR(model_->ZeroGrads());
  }
  units_.resize(groups.size());
  int64_t layer_padded = 0, layer_shard = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    Unit& u = units_[i];
    u.numel = groups[i].numel;
    u.shard = std::max<int64_t>(1, CeilDiv(u.numel, world_));
    u.slot = static_cast<int>(i) == root_ ? kRootSlot : static_cast<int>(i) % 2;
    if (static_cast<int>(i) != root_) {
      layer_padded = std::max(layer_padded, u.shard * world_);
      layer_shard = std::max(layer_shard, u.shard);
    }
  }
  if (!sharded) {
    views_ = train::ViewsOf(model_->parameters());
    for (const Parameter& p : model_->parameters()) {
      if (!p.trainable) continue;
      int64_t offset = 0;
      for (const Parameter* q : groups[static_cast<size_t>(p.unit)].params) {
        if (q == &p) break;
        offset += q->numel();
      }
      view_places_.push_back({p.unit, offset});
    }
    return Status::Ok();
  }

  // Move each unit's parameters into this rank's storage, then drop the model's copy (a
  // deferred model loads each unit just before: one unit at a time is ever whole here).
  for (size_t i = 0; i < groups.size(); ++i) {
    if (options_.load_unit) AIR_RETURN_IF_ERROR(options_.load_unit(static_cast<int>(i)));
    Unit& u = units_[i];
    const int64_t begin = std::min(u.numel, rank_ * u.shard);
    const int64_t owned = std::min(u.shard, u.numel - begin);
    const View full = groups[i].values_view;
    if (gathers()) {
      AIR_ASSIGN_OR_RETURN(u.values_buffer,
                           backend_->AllocateView(DType::kF32, {u.shard}, &u.values));
      backend_->Zero(u.values);
      if (owned > 0) backend_->Copy(u.values.Rows(0, owned), full.Rows(begin, owned));
    } else {
      AIR_ASSIGN_OR_RETURN(u.values_buffer,
                           backend_->AllocateView(DType::kF32, {u.shard * world_}, &u.values));
      backend_->Zero(u.values);
      backend_->Copy(u.values.Rows(0, u.numel), full);
    }
    AIR_ASSIGN_OR_RETURN(u.grad_shard_buffer,
                         backend_->AllocateView(DType::kF32, {u.shard}, &u.grad_shard));
    backend_->Zero(u.grad_shard);
    model_->ReleaseUnitStorage(static_cast<int>(i));
  }

  // Slots: two for the decoder layers, one for the root.
  slots_.resize(3);
  for (int s = 0; s < 3; ++s) {
    const int64_t padded = s == kRootSlot ? units_[root_].shard * world_ : layer_padded;
    const int64_t shard = s == kRootSlot ? units_[root_].shard : layer_shard;
    if (padded == 0) continue;  // a model without decoder layers
    const int64_t total = (gathers() ? padded : 0) + padded + shard;
    Slot& slot = slots_[static_cast<size_t>(s)];
    View all;
    AIR_ASSIGN_OR_RETURN(slot.buffer, backend_->AllocateView(DType::kF32, {total}, &all));
    backend_->Zero(all);
    int64_t at = 0;
    if (gathers()) {
      slot.values = all.Rows(0, padded);
      at = padded;
    }
    slot.grads = all.Rows(at, padded);
    slot.reduced = all.Rows(at + padded, shard);
  }

  // The optimizer's pieces: each parameter's part of [begin, begin + S).
  for (size_t i = 0; i < groups.size(); ++i) {
    Unit& u = units_[i];
    const int64_t lo = std::min(u.numel, rank_ * u.shard);
    const int64_t hi = std::min(u.numel, lo + u.shard);
    int64_t offset = 0;
    for (const Parameter* p : groups[i].params) {
      const int64_t start = std::max(offset, lo);
      const int64_t end = std::min(offset + p->numel(), hi);
      if (end > start) {
        train::ParamView v;
        v.name = p->name;
        v.numel = end - start;
        v.shape = {v.numel};
        v.decay = p->decay;
        v.value = gathers() ? u.values.f32() + (start - lo) : u.values.f32() + start;
        v.grad = u.grad_shard.f32() + (start - lo);
        views_.push_back(std::move(v));
        view_places_.push_back({static_cast<int>(i), start});
      }
      offset += p->numel();
    }
    // Until a hook binds it, point the unit somewhere valid (stale values, no gradients).
    model_->BindUnit(static_cast<int>(i), Padded(static_cast<int>(i)).Rows(0, u.numel), View());
  }
  options_.load_unit = nullptr;  // what it reads (the weight files) is gone after Apply
  return Status::Ok();
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
  return slots_[static_cast<size_t>(u.slot)].values.Rows(0, u.shard * world_);
}

View Fsdp::SlotGrads(int unit) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  return slots_[static_cast<size_t>(u.slot)].grads.Rows(0, u.shard * world_);
}

View Fsdp::Padded(int unit) const {
  if (gathers()) return SlotValues(unit);
  return units_[static_cast<size_t>(unit)].values;
}

void Fsdp::Record(const Status& s) {
  if (!s.ok() && error_.ok()) error_ = s;
}

void Fsdp::StartGather(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  Slot& slot = slots_[static_cast<size_t>(u.slot)];
  if (slot.gathered_unit == unit) return;  // already there (or on its way)
  slot.gathered_unit = unit;
  const float* send = u.values.f32();
  float* recv = SlotValues(unit).f32();
  const size_t count = static_cast<size_t>(u.shard);
  parallel::ProcessGroup* group = group_;
  u.gather = comm_->Submit([=] { return group->AllGather(send, recv, count, CommDType::kF32); });
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
  const float* send = SlotGrads(unit).f32();
  float* recv = slot.reduced.f32();
  const size_t count = static_cast<size_t>(u.shard);
  parallel::ProcessGroup* group = group_;
  parallel::ProcessGroup* replicas =
      replicas_ != nullptr && replicas_->size() > 1 ? replicas_ : nullptr;
  slot.reduce_unit = unit;
  slot.reduce = comm_->Submit([=]() -> Status {
    AIR_RETURN_IF_ERROR(group->ReduceScatter(send, recv, count, CommDType::kF32, ReduceOp::kSum));
    // HYBRID_SHARD: the node's shard sum, summed over the nodes.
    if (replicas != nullptr) {
      AIR_RETURN_IF_ERROR(replicas->AllReduce(recv, count, CommDType::kF32, ReduceOp::kSum));
    }
    return Status::Ok();
  });
}

void Fsdp::FinishReduce(Slot& slot) {
  if (slot.reduce_unit < 0) return;
  Record(comm_->Wait(slot.reduce));
  Unit& u = units_[static_cast<size_t>(slot.reduce_unit)];
  backend_->AddInPlace(u.grad_shard.f32(), slot.reduced.f32(), u.shard);
  slot.reduce = 0;
  slot.reduce_unit = -1;
}

void Fsdp::PrepareGrads(int unit) {
  Unit& u = units_[static_cast<size_t>(unit)];
  Slot& slot = slots_[static_cast<size_t>(u.slot)];
  FinishReduce(slot);  // the slot's gradient memory is about to be reused
  const View grads = SlotGrads(unit);
  backend_->Zero(grads);
  model_->BindUnit(unit, Padded(unit).Rows(0, u.numel), grads.Rows(0, u.numel));
}

void Fsdp::BeforeForward(int unit) {
  switch (options_.strategy) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kHybridShard: {
      WaitGather(unit);
      const Unit& u = units_[static_cast<size_t>(unit)];
      model_->BindUnit(unit, SlotValues(unit).Rows(0, u.numel), View());
      const int next = unit == root_ ? 0 : unit + 1;
      if (next < root_) StartGather(next);  // prefetch the next layer
      break;
    }
    case ShardingStrategy::kShardGradOp:
      WaitGather(unit);  // the post-step all-gather of this unit
      break;
    default:
      break;
  }
}

void Fsdp::BeforeBackward(int unit) {
  switch (options_.strategy) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kHybridShard: {
      WaitGather(unit);
      PrepareGrads(unit);
      const int next = unit == root_ ? root_ - 1 : unit - 1;
      if (next >= 0) StartGather(next);  // prefetch the layer below
      break;
    }
    case ShardingStrategy::kShardGradOp:
      PrepareGrads(unit);
      break;
    default:
      break;
  }
}

void Fsdp::AfterBackward(int unit) {
  if (options_.strategy != ShardingStrategy::kNoShard) {
    StartReduce(unit);
    return;
  }
  if (!sync_gradients_) return;
  const View grads = model_->units()[static_cast<size_t>(unit)].grads_view;
  if (grads.empty()) return;  // nothing trainable in this unit
  float* data = grads.f32();
  const size_t count = static_cast<size_t>(grads.numel());
  parallel::ProcessGroup* group = group_;
  units_[static_cast<size_t>(unit)].allreduce =
      comm_->Submit([=] { return group->AllReduce(data, count, CommDType::kF32, ReduceOp::kSum); });
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
  if (options_.strategy == ShardingStrategy::kNoShard) return model_->ZeroGrads();
  for (Unit& u : units_) backend_->Zero(u.grad_shard);
  return error_;
}

Status Fsdp::FinishGradients() {
  for (Slot& s : slots_) FinishReduce(s);
  for (Unit& u : units_) {
    Record(comm_->Wait(u.allreduce));
    u.allreduce = 0;
  }
  return error_;
}

Status Fsdp::AfterOptimizerStep() {
  switch (options_.strategy) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kHybridShard:
      for (Slot& s : slots_) s.gathered_unit = -1;  // every gathered copy is stale now
      break;
    case ShardingStrategy::kShardGradOp:
      for (Unit& u : units_) {
        float* all = u.values.f32();
        const float* mine = all + rank_ * u.shard;
        const size_t count = static_cast<size_t>(u.shard);
        parallel::ProcessGroup* group = group_;
        u.gather =
            comm_->Submit([=] { return group->AllGather(mine, all, count, CommDType::kF32); });
      }
      break;
    default:
      break;
  }
  return error_;
}

Result<std::vector<Tensor>> Fsdp::GatherFullParameters() {
  std::vector<Parameter>& params = model_->parameters();
  std::vector<Tensor> out;
  if (rank_ == 0) out.resize(params.size());
  std::vector<ParamGroup>& groups = model_->units();
  for (size_t i = 0; i < groups.size(); ++i) {
    const int unit = static_cast<int>(i);
    View full = groups[i].values_view;
    if (options_.strategy != ShardingStrategy::kNoShard) {
      WaitGather(unit);
      full = Padded(unit).Rows(0, units_[i].numel);
    }
    AIR_RETURN_IF_ERROR(error_);
    if (rank_ != 0) continue;
    int64_t offset = 0;
    for (const Parameter* p : groups[i].params) {
      const View v(full.buffer(), full.byte_offset() + static_cast<size_t>(offset) * sizeof(float),
                   DType::kF32, p->shape);
      out[static_cast<size_t>(p - params.data())] = backend_->ToHostTensor(v);
      offset += p->numel();
    }
  }
  return out;
}

Fsdp::ShardRange Fsdp::Range(int unit) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  if (options_.strategy == ShardingStrategy::kNoShard) return {0, u.numel, u.numel};
  return {std::min(u.numel, rank_ * u.shard), u.shard, u.numel};
}

View Fsdp::ShardView(int unit) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  switch (options_.strategy) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kHybridShard:
      return u.values;
    case ShardingStrategy::kShardGradOp:
      return u.values.Rows(rank_ * u.shard, u.shard);
    default:
      return model_->units()[static_cast<size_t>(unit)].values_view;
  }
}

std::vector<float> Fsdp::ReadShard(int unit) const {
  const View v = ShardView(unit);
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
  const View v = ShardView(unit);
  if (static_cast<int64_t>(values.size()) != v.numel()) {
    return InvalidArgument(fmt::format("unit {}: a shard of {} values where {} were expected", unit,
                                       values.size(), v.numel()));
  }
  backend_->CopyToDevice(v, values.data());
  return Status::Ok();
}

FsdpMemory Fsdp::memory() const {
  FsdpMemory m;
  if (options_.strategy == ShardingStrategy::kNoShard) {
    for (const ParamGroup& g : model_->units()) {
      m.parameters += static_cast<int64_t>(g.values_view.bytes());
      m.gradients += static_cast<int64_t>(g.grads_view.bytes());
    }
    return m;
  }
  for (const Unit& u : units_) {
    m.parameters += static_cast<int64_t>(u.values.bytes());
    m.gradients += static_cast<int64_t>(u.grad_shard.bytes());
  }
  for (const Slot& s : slots_) {
    m.gather += s.buffer ? static_cast<int64_t>(s.buffer->bytes()) : 0;
  }
  return m;
}

}  // namespace air::engine::fsdp
