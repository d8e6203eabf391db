// Fsdp: fully sharded data parallelism applied to a CausalLm from outside (torchtitan's
// apply_fsdp; the model is written for one device and knows nothing of ranks). It is the one
// training path for every world size: one process is a group of one. It takes over each unit's
// storage (CausalLm::ReleaseUnitStorage/BindUnit: a frozen and a trainable segment per decoder
// layer plus the root unit, model/parameter.h) and installs the model's UnitHooks, where it
// gathers, frees and reduces units on the communication thread (comm_thread.h) so communication
// overlaps compute.
//
// Layout (llm.c's ZeRO idea), per segment: a segment of n elements is padded to P = S * W with
// S = ceil(n / W) over W ranks, and rank r owns elements [r*S, (r+1)*S). The trainable segment
// keeps this rank's fp32 master range and fp32 gradient range; the optimizer runs over this
// rank's pieces of the parameters that fall in it (OptimizerViews). The frozen segment (LoRA's
// base) keeps only its values, in param_dtype: no fp32 master, no gradient, no optimizer state —
// the two segments share a unit, its gathers and its hooks, with no rule that a unit be all
// frozen or all trainable (FSDP1's "uniform requires_grad").
//
// Mixed precision (mixed_precision.h): the model computes with parameters in param_dtype. The
// fp32 master shard is converted to param_dtype before it is all-gathered (half the bytes for
// bf16); the frozen segment is stored in param_dtype and travels as it is; gradients are
// computed in fp32, converted to reduce_dtype for the reduce-scatter (or all-reduce), whose rank
// sums are accumulated in fp32 (ProcessGroup's rule), and the reduced shard is added into the
// fp32 gradient shard.
//
// FULL_SHARD: only shards are kept. Two gather slots serve the decoder layers (the unit being
// computed and the next one, prefetched), one serves the root unit, which stays gathered from
// the start of the forward to the end of the backward. Before a layer's forward its all-gather
// is waited for and the next layer's is started; before its backward likewise (downwards), and
// after its backward its gradient is reduce-scattered while the layer below runs; the sum lands
// in this rank's gradient shard when the slot is next needed or in FinishGradients. The root's
// gradients are bound in its before_forward (the model writes the head's gradient during the
// training forward: causal_lm.h).
// SHARD_GRAD_OP: every rank keeps the whole (padded) parameters in param_dtype; gradients go
// through the same slots and reduce-scatters; after the optimizer step each unit's updated
// trainable shard is converted into its place and all-gathered in place, waited for before the
// unit's next forward.
// HYBRID_SHARD: FULL_SHARD over `group` (the node's ranks); each reduce-scattered gradient shard
// is then all-reduced over `replicas` (the ranks with the same local rank on the other nodes).
// NO_SHARD (and any strategy on a group of one: there is nothing to shard): every rank keeps
// whole units — the frozen segment in param_dtype, the trainable fp32 master and, under mixed
// precision, a param_dtype compute copy refreshed after each optimizer step; each unit's
// gradient is all-reduced after its backward in the micro-batch where set_sync_gradients(true)
// (the last of a step), overlapping the backward of the units below.
//
// Gradients are SUMMED over ranks: the trainer scales each micro-batch's backward by its loss
// tokens over the global count, so the sum is the gradient of the global mean.
//
// Errors: a hook cannot return a Status, so a failed collective (a lost rank) is recorded and
// returned by the next FinishGradients/AfterOptimizerStep/status(); the model keeps computing
// on valid (stale) memory meanwhile, never on freed memory.
// Thread safety: driven by the model's thread; the ProcessGroup is used only from the
// CommThread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/fsdp/mixed_precision.h"
#include "engine/fsdp/sharding_strategy.h"
#include "engine/model/causal_lm.h"
#include "engine/parallel/comm_thread.h"
#include "engine/parallel/data_group.h"
#include "engine/parallel/process_group.h"
#include "engine/tensor.h"
#include "engine/train/param_view.h"

namespace air::engine::fsdp {

struct FsdpOptions {
  ShardingStrategy strategy = ShardingStrategy::kFullShard;
  MixedPrecision precision;
  // The dtype the parameters are held in (their torch_dtype): the master weights, their
  // gradients (and, by the optimizer, its moments). F32 (the default: fp32 masters under a
  // bf16 param_dtype) or BF16 (the seed's torch_dtype bfloat16: 8 bytes a parameter with AdamW);
  // when it equals param_dtype the master is the compute copy.
  DType state_dtype = DType::kF32;
  // The collectives on parameters and gradients (parallel/data_group.h), over the ranks of
  // `group` (and, HYBRID_SHARD, of `replicas`): null means a HostDataGroup over the group on
  // the CommThread, which takes host memory only — a model on a GPU needs a staged or NCCL one.
  // They must outlive the Fsdp object.
  parallel::DataGroup* data = nullptr;
  parallel::DataGroup* replica_data = nullptr;
  // For a model created with ModelOptions::deferred_storage: gives unit `u` its storage and
  // fills it (CausalLm::AllocateUnitStorage + io's LoadHfUnit). Apply calls it for one unit at a
  // time and keeps only this rank's part before the next, so loading adds at most one unit to
  // what the rank holds afterwards. Unset: the model arrives with every unit loaded.
  std::function<Status(int unit)> load_unit;
};

// Bytes this rank holds for training state, by kind (for the memory figures).
struct FsdpMemory {
  int64_t parameters = 0;  // fp32 master storage plus resident param_dtype copies (trainable)
  int64_t frozen = 0;      // the frozen segments' param_dtype storage (shards or whole)
  int64_t gradients = 0;   // fp32 gradient shards or whole gradients
  int64_t gather = 0;      // gather / reduce slots (transient full units)
};

// A unit's elements, for planning memory before a model exists.
struct UnitSize {
  int64_t trainable = 0;
  int64_t frozen = 0;
};

// The bytes of the slots that gather and reduce units (two for the decoder layers, one for the
// root unit) for a model whose units (the root last) have these sizes, sharded with `strategy`
// over `world` ranks (HYBRID_SHARD: a node's ranks): what Apply allocates for them (0 for
// NO_SHARD and a group of one, which keep units whole). The training plan's FSDP buffers.
uint64_t SlotBytes(const std::vector<UnitSize>& units, int world, ShardingStrategy strategy,
                   const MixedPrecision& precision, DType state_dtype);

class Fsdp {
 public:
  // Shards `model` (already loaded with the same weights on every rank, or loadable through
  // load_unit) over `group`. `comm` runs every collective and must outlive this object. The
  // hooks are removed on destruction. HYBRID_SHARD: `group` is the node's ranks (the shards) and
  // `replicas` the ranks holding the same shard on the other nodes; both must outlive this
  // object. Other strategies: no `replicas`. The model must compute in precision.param_dtype.
  static Result<std::unique_ptr<Fsdp>> Apply(CausalLm& model, parallel::ProcessGroup& group,
                                             parallel::CommThread& comm, const FsdpOptions& options,
                                             parallel::ProcessGroup* replicas = nullptr);
  ~Fsdp();
  Fsdp(const Fsdp&) = delete;
  Fsdp& operator=(const Fsdp&) = delete;

  // The strategy as configured, and the one in effect (NO_SHARD on a group of one).
  ShardingStrategy strategy() const { return options_.strategy; }
  ShardingStrategy effective_strategy() const { return strategy_; }
  const MixedPrecision& precision() const { return options_.precision; }
  DType state_dtype() const { return options_.state_dtype; }
  int rank() const { return rank_; }
  int world_size() const { return world_; }

  // Starts a step's accumulation: zeroes this rank's gradient (shards, or whole for NO_SHARD).
  Status ZeroGrads();
  // NO_SHARD only: all-reduce the gradients in the next backward (the step's last micro-batch).
  void set_sync_gradients(bool sync) { sync_gradients_ = sync; }
  // Waits for every outstanding reduction; afterwards OptimizerViews' gradients hold the sum over
  // ranks. Returns the first communication error of the step.
  Status FinishGradients();
  // This rank's part of every trainable parameter (pieces of fp32 master storage), with fp32
  // gradients; valid for the life of this object.
  const std::vector<train::ParamView>& OptimizerViews() const { return views_; }
  // Where OptimizerViews()[i] lies: its unit and first element within the unit's flat buffer.
  struct ViewPlace {
    int unit = 0;
    int64_t offset = 0;
  };
  const std::vector<ViewPlace>& view_places() const { return view_places_; }
  // True when every rank holds the whole gradient (NO_SHARD): the norm needs no all-reduce.
  bool gradients_replicated() const { return strategy_ == ShardingStrategy::kNoShard; }
  // Collective: the sum over the shards of each rank's squared gradient-shard norm (over the
  // shard group only: HYBRID_SHARD's replicas hold the same shard).
  Result<double> SumOverShards(double local) const;
  // Whether this rank writes its shards into a checkpoint (HYBRID_SHARD: the first node only;
  // NO_SHARD: rank 0 only).
  bool writes_state() const;
  // After the optimizer updated the master shards through OptimizerViews (writing their compute
  // copies too, NO_SHARD): converts and all-gathers the updated shards (SHARD_GRAD_OP), or marks
  // the gathered copies stale (FULL_SHARD).
  Status AfterOptimizerStep();
  // After the masters changed any other way (a checkpoint written back by WriteShard): as
  // AfterOptimizerStep, and NO_SHARD's param_dtype copies converted from the masters.
  Status RefreshComputeCopies();

  // Collective: every unit's whole parameters in turn, one unit at a time — the fp32 masters
  // of the trainable ones and (unless trainable_only) the frozen ones widened from their
  // param_dtype storage; rank 0 returns host tensors of every parameter in the model's order
  // (empty ones for frozen parameters when trainable_only), the other ranks an empty vector.
  Result<std::vector<Tensor>> GatherFullParameters(bool trainable_only = false);
  // For sharded checkpoints: this rank's fp32 master range of unit u's trainable segment on the
  // host, and writing it back (call RefreshComputeCopies after writing every unit). The frozen
  // segment is not training state (it is reloaded from the base model).
  struct ShardRange {
    int64_t begin = 0;  // first element of the segment this rank owns
    int64_t count = 0;  // S (whole n for NO_SHARD)
    int64_t numel = 0;  // n: the unit's trainable elements
  };
  ShardRange Range(int unit) const;
  std::vector<float> ReadShard(int unit) const;
  Status WriteShard(int unit, const std::vector<float>& values);

  FsdpMemory memory() const;
  Status status() const { return error_; }
  double comm_seconds() const { return data_->busy_seconds(); }
  double wait_seconds() const { return data_->wait_seconds(); }

 private:
  using Works = std::vector<std::unique_ptr<parallel::CollectiveWork>>;
  struct Unit {
    // The trainable segment.
    int64_t numel = 0;  // n
    int64_t shard = 0;  // S (0 when n is 0: nothing to keep or communicate)
    std::unique_ptr<Buffer> master_buffer;
    View master;  // state_dtype: S (sharded) or n (NO_SHARD)
    std::unique_ptr<Buffer> resident_buffer;
    View resident;  // param_dtype whole segment: P (SHARD_GRAD_OP), n (NO_SHARD)
    std::unique_ptr<Buffer> grad_buffer;
    View grads;  // state_dtype: S (sharded) or n (NO_SHARD)
    std::unique_ptr<Buffer> reduce_buffer;
    View reduce_send;  // NO_SHARD with a reduce dtype: grads in reduce_dtype
    // The frozen segment: values only, in param_dtype.
    int64_t frozen_numel = 0;  // n_f
    int64_t frozen_shard = 0;  // S_f (0 when n_f is 0)
    std::unique_ptr<Buffer> frozen_buffer;
    View frozen;      // param_dtype: S_f (gathering strategies) or n_f (whole)
    int slot = -1;    // the gather / reduce slot this unit uses
    Works gather;     // all-gathers into its slot (or in place) in flight
    Works allreduce;  // NO_SHARD: its gradient all-reduce in flight
  };
  struct Slot {
    std::unique_ptr<Buffer> values_buffer, grads_buffer, comm_buffer;
    View values;       // P_f + P (param_dtype): a unit's gathered frozen then trainable segment
    View grads;        // P (state_dtype): a unit's unsharded gradient
    View gather_send;  // S (param_dtype): the master shard converted for the all-gather
    View reduce_send;  // P (reduce_dtype): the gradient converted for the reduce-scatter
    View reduced;      // S (reduce_dtype): this rank's reduced shard
    int gathered_unit = -1;  // whose parameters the values hold
    int reduce_unit = -1;    // whose reduce-scatter is in flight
    Works reduce;
  };

  Fsdp(CausalLm& model, parallel::ProcessGroup& group, parallel::CommThread& comm,
       FsdpOptions options, parallel::ProcessGroup* replicas);
  // FULL_SHARD and HYBRID_SHARD keep only shards and gather units into slots.
  bool gathers() const {
    return strategy_ == ShardingStrategy::kFullShard || strategy_ == ShardingStrategy::kHybridShard;
  }
  DType param_dtype() const { return options_.precision.param_dtype; }
  DType reduce_dtype() const { return options_.precision.reduce_dtype; }
  Status Setup();
  Status SetupUnit(int unit);
  Status SetupSlots();
  void SetupOptimizerViews();
  void InstallHooks();
  View SlotValues(int unit) const;  // the unit's gathered trainable segment (P) in its slot
  View SlotFrozen(int unit) const;  // its gathered frozen segment (P_f) in its slot
  View SlotGrads(int unit) const;
  // The unit's whole trainable / frozen segment in param_dtype (slot or resident), n elements.
  View Padded(int unit) const;
  View WholeFrozen(int unit) const;
  void Bind(int unit, const View& grads);  // the unit's whole segments and `grads`
  void Record(const Status& s);
  // Waits for every work of `works` (recording the first error) and clears it.
  void WaitAll(Works& works);

  void StartGather(int unit);
  void WaitGather(int unit);
  void StartReduce(int unit);
  void FinishReduce(Slot& slot);
  void PrepareGrads(int unit);  // waits for the slot's previous reduce, zeroes, binds
  void BeforeForward(int unit);
  void BeforeBackward(int unit);
  void AfterBackward(int unit);
  void AllReduceGrads(int unit);  // NO_SHARD
  // The fp32 master of a whole trainable segment, and the whole frozen segment in param_dtype
  // (gathered into `scratch` when sharded), for saving.
  Result<View> GatherMaster(int unit, std::unique_ptr<Buffer>& scratch);
  Result<View> GatherFrozen(int unit, std::unique_ptr<Buffer>& scratch);

  CausalLm* model_;
  parallel::ProcessGroup* group_;     // the control group: scalars (SumOverShards)
  parallel::ProcessGroup* replicas_;  // HYBRID_SHARD only
  parallel::CommThread* comm_;
  std::unique_ptr<parallel::DataGroup> own_data_, own_replica_data_;  // the defaults
  parallel::DataGroup* data_ = nullptr;          // parameters and gradients over `group`
  parallel::DataGroup* replica_data_ = nullptr;  // HYBRID_SHARD: over `replicas`
  const Backend* backend_;
  FsdpOptions options_;
  ShardingStrategy strategy_;  // in effect
  int rank_ = 0;
  int world_ = 1;
  int root_ = 0;
  bool sync_gradients_ = true;
  std::vector<Unit> units_;
  std::vector<Slot> slots_;  // 0, 1: decoder layers (alternating); 2: root
  std::vector<train::ParamView> views_;
  std::vector<ViewPlace> view_places_;
  Status error_;
};

}  // namespace air::engine::fsdp
