// FSDP over a CausalLm's units: setup — the segments' storage per strategy, the slots, the
// optimizer views (see fsdp.h for the strategies, slots, ordering and mixed precision). The
// hooks and the gradient path are in fsdp_hooks.cc, checkpoint access in fsdp_state.cc.
#include "engine/fsdp/fsdp.h"

#include <fmt/format.h>

#include <algorithm>

namespace air::engine::fsdp {
namespace {

constexpr int kRootSlot = 2;

// S for a segment of n elements over w ranks: 0 for an empty segment (nothing is kept or sent).
int64_t ShardSize(int64_t n, int w) { return n == 0 ? 0 : (n + w - 1) / w; }

// One slot's sizes: elements of its views and the layout of its conversion buffer
// [gather_send | reduce_send | reduced] (64-byte aligned pieces).
struct SlotPlan {
  int64_t values = 0;  // P_f + P gathered (param_dtype); 0 when the strategy does not gather
  int64_t padded = 0;  // P: the unsharded gradient (state_dtype); 0: nothing to reduce
  int64_t shard = 0;   // S
  bool convert_gather = false, convert_reduce = false;
  size_t send_at = 0, reduced_at = 0, comm_bytes = 0;

  uint64_t Bytes(DType param, DType state) const {
    if (padded == 0) return static_cast<uint64_t>(values) * DTypeSize(param);
    return static_cast<uint64_t>(values) * DTypeSize(param) +
           static_cast<uint64_t>(padded) * DTypeSize(state) + comm_bytes;
  }
};

// The three slots (kRootSlot the root's) for units of (trainable shard, frozen shard) sizes, the
// root at `root`.
std::vector<SlotPlan> PlanSlots(const std::vector<std::pair<int64_t, int64_t>>& shards, int root,
                                int world, bool gathers, const MixedPrecision& precision,
                                DType state) {
  int64_t layer_values = 0, layer_padded = 0, layer_shard = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    if (static_cast<int>(i) == root) continue;
    const auto [shard, frozen_shard] = shards[i];
    layer_values = std::max(layer_values, (frozen_shard + shard) * world);
    layer_padded = std::max(layer_padded, shard * world);
    layer_shard = std::max(layer_shard, shard);
  }
  const auto [root_shard, root_frozen] = shards[static_cast<size_t>(root)];
  std::vector<SlotPlan> slots(3);
  for (int s = 0; s < 3; ++s) {
    const bool is_root = s == kRootSlot;
    SlotPlan& p = slots[static_cast<size_t>(s)];
    const int64_t values = is_root ? (root_frozen + root_shard) * world : layer_values;
    p.values = gathers ? values : 0;
    p.padded = is_root ? root_shard * world : layer_padded;
    p.shard = is_root ? root_shard : layer_shard;
    if (p.padded == 0) continue;
    p.convert_gather = gathers && precision.param_dtype != state;
    p.convert_reduce = precision.reduce_dtype != state;
    const size_t gather_bytes =
        p.convert_gather ? static_cast<size_t>(p.shard) * DTypeSize(precision.param_dtype) : 0;
    const size_t send_bytes =
        p.convert_reduce ? static_cast<size_t>(p.padded) * DTypeSize(precision.reduce_dtype) : 0;
    const size_t align = 64;
    p.send_at = (gather_bytes + align - 1) / align * align;
    p.reduced_at = p.send_at + (send_bytes + align - 1) / align * align;
    p.comm_bytes = p.reduced_at + static_cast<size_t>(p.shard) * DTypeSize(precision.reduce_dtype);
  }
  return slots;
}

}  // namespace

uint64_t SlotBytes(const std::vector<UnitSize>& units, int world, ShardingStrategy strategy,
                   const MixedPrecision& precision, DType state_dtype) {
  if (units.empty() || world <= 1 || strategy == ShardingStrategy::kNoShard) return 0;
  std::vector<std::pair<int64_t, int64_t>> shards;
  for (const UnitSize& u : units) {
    shards.emplace_back(ShardSize(u.trainable, world), ShardSize(u.frozen, world));
  }
  const bool gathers =
      strategy == ShardingStrategy::kFullShard || strategy == ShardingStrategy::kHybridShard;
  uint64_t bytes = 0;
  for (const SlotPlan& p : PlanSlots(shards, static_cast<int>(units.size()) - 1, world, gathers,
                                     precision, state_dtype)) {
    bytes += p.Bytes(precision.param_dtype, state_dtype);
  }
  return bytes;
}

Fsdp::Fsdp(CausalLm& model, parallel::ProcessGroup& group, parallel::CommThread& comm,
           FsdpOptions options, parallel::ProcessGroup* replicas)
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
      root_(model.root_unit()) {
  data_ = options_.data;
  if (data_ == nullptr) {
    own_data_ = parallel::HostDataGroup(group, comm);
    data_ = own_data_.get();
  }
  replica_data_ = options_.replica_data;
  if (replica_data_ == nullptr && replicas != nullptr) {
    own_replica_data_ = parallel::HostDataGroup(*replicas, comm);
    replica_data_ = own_replica_data_.get();
  }
}

Fsdp::~Fsdp() {
  // Nothing may still write into our buffers once they are gone (errors were reported by the
  // calls that the trainer waited for; here only the waiting matters).
  for (Slot& s : slots_) WaitAll(s.reduce);
  for (Unit& u : units_) {
    WaitAll(u.gather);
    WaitAll(u.allreduce);
  }
  model_->set_unit_hooks({});
}

Result<std::unique_ptr<Fsdp>> Fsdp::Apply(CausalLm& model, parallel::ProcessGroup& group,
                                          parallel::CommThread& comm, const FsdpOptions& options,
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
  if (group.size() > 1 && model.backend().device().type != DeviceType::kCpu &&
      (options.data == nullptr || (replicas != nullptr && options.replica_data == nullptr))) {
    return InvalidArgument(fmt::format(
        "FSDP over {} ranks on {} needs a data group over device memory (NCCL, or Gloo staged "
        "through the host): the host group reads host memory only",
        group.size(), model.backend().device().ToString()));
  }
  if (options.state_dtype != DType::kF32 && options.state_dtype != DType::kBF16) {
    return InvalidArgument(
        fmt::format("FSDP keeps its state in F32 or BF16, not {}", DTypeName(options.state_dtype)));
  }
  std::unique_ptr<Fsdp> fsdp(new Fsdp(model, group, comm, options, replicas));
  AIR_RETURN_IF_ERROR(fsdp->Setup());
  fsdp->InstallHooks();
  return fsdp;
}

Status Fsdp::Setup() {
  const std::vector<ParamGroup>& groups = model_->units();
  units_.resize(groups.size());
  const bool whole = strategy_ == ShardingStrategy::kNoShard;
  for (size_t i = 0; i < groups.size(); ++i) {
    Unit& u = units_[i];
    u.numel = 0;
    u.frozen_numel = 0;
    for (const Parameter* p : groups[i].params)
      (p->trainable ? u.numel : u.frozen_numel) += p->numel();
    u.shard = whole ? u.numel : ShardSize(u.numel, world_);
    u.frozen_shard = whole ? u.frozen_numel : ShardSize(u.frozen_numel, world_);
    u.slot = static_cast<int>(i) == root_ ? kRootSlot : static_cast<int>(i) % 2;
  }
  if (!whole) AIR_RETURN_IF_ERROR(SetupSlots());
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
  const ParamGroup& g = model_->units()[static_cast<size_t>(unit)];
  const View full = g.trainable_view.Flat();      // F32, n (the model's own storage)
  const View full_frozen = g.frozen_view.Flat();  // F32, n_f
  const Backend& b = *backend_;
  if (strategy_ == ShardingStrategy::kNoShard) {
    if (u.frozen_numel > 0) {
      AIR_ASSIGN_OR_RETURN(u.frozen_buffer,
                           b.AllocateView(param_dtype(), {u.frozen_numel}, &u.frozen));
      b.Convert(full_frozen, u.frozen);
    }
    AIR_ASSIGN_OR_RETURN(u.master_buffer, b.AllocateView(state_dtype(), {u.numel}, &u.master));
    if (u.numel > 0) b.Convert(full, u.master);
    if (param_dtype() == state_dtype()) {
      u.resident = u.master;  // the master is the compute copy
    } else {
      AIR_ASSIGN_OR_RETURN(u.resident_buffer,
                           b.AllocateView(param_dtype(), {u.numel}, &u.resident));
      if (u.numel > 0) b.Convert(u.master, u.resident);
    }
    AIR_ASSIGN_OR_RETURN(u.grad_buffer, b.AllocateView(state_dtype(), {u.numel}, &u.grads));
    b.Zero(u.grads);
    if (world_ > 1 && reduce_dtype() != state_dtype()) {
      AIR_ASSIGN_OR_RETURN(u.reduce_buffer,
                           b.AllocateView(reduce_dtype(), {u.numel}, &u.reduce_send));
    }
    model_->ReleaseUnitStorage(unit);
    Bind(unit, u.grads);
    return Status::Ok();
  }
  // The frozen segment: whole (SHARD_GRAD_OP keeps whole parameters) or this rank's shard, in
  // param_dtype; it never changes, so it is never gathered after the step.
  if (u.frozen_numel > 0) {
    if (gathers()) {
      const int64_t begin = std::min(u.frozen_numel, rank_ * u.frozen_shard);
      const int64_t owned = std::min(u.frozen_shard, u.frozen_numel - begin);
      AIR_ASSIGN_OR_RETURN(u.frozen_buffer,
                           b.AllocateView(param_dtype(), {u.frozen_shard}, &u.frozen));
      b.Zero(u.frozen);
      if (owned > 0) b.Convert(full_frozen.Slice(begin, owned), u.frozen.Slice(0, owned));
    } else {
      AIR_ASSIGN_OR_RETURN(u.frozen_buffer,
                           b.AllocateView(param_dtype(), {u.frozen_numel}, &u.frozen));
      b.Convert(full_frozen, u.frozen);
    }
  }
  const int64_t begin = std::min(u.numel, rank_ * u.shard);
  const int64_t owned = std::min(u.shard, u.numel - begin);
  if (strategy_ == ShardingStrategy::kShardGradOp) {
    AIR_ASSIGN_OR_RETURN(u.resident_buffer,
                         b.AllocateView(param_dtype(), {u.shard * world_}, &u.resident));
    b.Zero(u.resident);
    if (u.numel > 0) b.Convert(full, u.resident.Slice(0, u.numel));
  }
  if (strategy_ == ShardingStrategy::kShardGradOp && param_dtype() == state_dtype()) {
    u.master = u.resident.Slice(rank_ * u.shard, u.shard);  // the resident copy is the master
  } else {
    AIR_ASSIGN_OR_RETURN(u.master_buffer, b.AllocateView(state_dtype(), {u.shard}, &u.master));
    b.Zero(u.master);
    if (owned > 0) b.Convert(full.Slice(begin, owned), u.master.Slice(0, owned));
  }
  AIR_ASSIGN_OR_RETURN(u.grad_buffer, b.AllocateView(state_dtype(), {u.shard}, &u.grads));
  b.Zero(u.grads);
  model_->ReleaseUnitStorage(unit);
  // Until a hook binds it, point the unit somewhere valid (stale values, no gradients).
  Bind(unit, View());
  return Status::Ok();
}

Status Fsdp::SetupSlots() {
  std::vector<std::pair<int64_t, int64_t>> shards;
  for (const Unit& u : units_) shards.emplace_back(u.shard, u.frozen_shard);
  const std::vector<SlotPlan> plans =
      PlanSlots(shards, root_, world_, gathers(), options_.precision, state_dtype());
  const Backend& b = *backend_;
  slots_.resize(plans.size());
  for (size_t s = 0; s < plans.size(); ++s) {
    const SlotPlan& p = plans[s];
    Slot& slot = slots_[s];
    if (p.values > 0) {
      AIR_ASSIGN_OR_RETURN(slot.values_buffer,
                           b.AllocateView(param_dtype(), {p.values}, &slot.values));
      b.Zero(slot.values);
    }
    if (p.padded == 0) continue;  // nothing trainable to reduce (or no decoder layers)
    AIR_ASSIGN_OR_RETURN(slot.grads_buffer, b.AllocateView(state_dtype(), {p.padded}, &slot.grads));
    b.Zero(slot.grads);
    // One buffer for the conversions the collectives need: [gather_send | reduce_send | reduced].
    AIR_ASSIGN_OR_RETURN(slot.comm_buffer, b.Allocate(p.comm_bytes));
    if (p.convert_gather) {
      slot.gather_send = View(slot.comm_buffer.get(), 0, param_dtype(), {p.shard});
    }
    if (p.convert_reduce) {
      slot.reduce_send = View(slot.comm_buffer.get(), p.send_at, reduce_dtype(), {p.padded});
    }
    slot.reduced = View(slot.comm_buffer.get(), p.reduced_at, reduce_dtype(), {p.shard});
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
    int64_t offset = 0;  // within the trainable segment
    for (const Parameter* p : groups[i].params) {
      if (!p->trainable) continue;
      const int64_t start = std::max(offset, lo);
      const int64_t end = std::min(offset + p->numel(), hi);
      if (end > start) {
        train::ParamView v;
        v.name = p->name;
        v.numel = end - start;
        v.shape = whole ? p->shape : Shape{v.numel};
        v.decay = p->decay;
        v.value = u.master.Slice(start - lo, v.numel);
        v.grad = u.grads.Slice(start - lo, v.numel);
        // NO_SHARD keeps a whole param_dtype copy: the optimizer writes it in its pass
        // (AfterOptimizerStep then has nothing to convert).
        if (whole && param_dtype() != state_dtype()) v.compute = u.resident.Slice(start, v.numel);
        views_.push_back(std::move(v));
        view_places_.push_back({static_cast<int>(i), start});
      }
      offset += p->numel();
    }
  }
}

View Fsdp::SlotValues(int unit) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  return slots_[static_cast<size_t>(u.slot)].values.Slice(u.frozen_shard * world_,
                                                          u.shard * world_);
}

View Fsdp::SlotFrozen(int unit) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  return slots_[static_cast<size_t>(u.slot)].values.Slice(0, u.frozen_shard * world_);
}

View Fsdp::SlotGrads(int unit) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  if (u.shard == 0) return View();
  return slots_[static_cast<size_t>(u.slot)].grads.Slice(0, u.shard * world_);
}

View Fsdp::Padded(int unit) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  if (u.numel == 0) return View();
  if (gathers()) return SlotValues(unit).Slice(0, u.numel);
  return u.resident.Slice(0, u.numel);
}

View Fsdp::WholeFrozen(int unit) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  if (u.frozen_numel == 0) return View();
  if (gathers()) return SlotFrozen(unit).Slice(0, u.frozen_numel);
  return u.frozen;
}

void Fsdp::Bind(int unit, const View& grads) {
  const Unit& u = units_[static_cast<size_t>(unit)];
  model_->BindUnit(unit, WholeFrozen(unit), Padded(unit),
                   grads.empty() || u.numel == 0 ? View() : grads.Slice(0, u.numel));
}

void Fsdp::Record(const Status& s) {
  if (!s.ok() && error_.ok()) error_ = s;
}

void Fsdp::WaitAll(Works& works) {
  for (auto& work : works) Record(work->Wait());
  works.clear();
}

}  // namespace air::engine::fsdp
