// Fsdp: fully sharded data parallelism applied to a LlamaModel from outside (torchtitan's
// apply_fsdp; the model is written for one device and knows nothing of ranks). It takes over
// each FSDP unit's storage (LlamaModel::ReleaseUnitStorage/BindUnit: one flat buffer per decoder
// layer plus the root unit) and installs the model's UnitHooks, where it gathers, frees and
// reduces units on the communication thread (comm_thread.h) so communication overlaps compute.
//
// Layout (llm.c's ZeRO idea): unit u has n elements; with W ranks its flat buffer is padded to
// P = S * W with S = ceil(n / W), and rank r owns elements [r*S, (r+1)*S). Sharded gradients
// and optimizer state cover exactly the owned range, so the optimizer runs over this rank's
// pieces of the parameters that fall in it (OptimizerViews).
//
// FULL_SHARD: each rank keeps only its parameter shards. Two gather slots serve the decoder
// layers (the unit being computed and the next one, prefetched), one serves the root unit,
// which stays gathered from the start of the forward to the end of the backward. Before a
// layer's forward its all-gather is waited for and the next layer's is started; before its
// backward likewise (downwards), and after its backward its gradient is reduce-scattered while
// the layer below runs; the sum lands in this rank's gradient shard when the slot is next needed
// or in FinishGradients.
// SHARD_GRAD_OP: every rank keeps the whole (padded) parameters; gradients go through the
// same slots and reduce-scatters; after the optimizer step each unit's updated shard is
// all-gathered in place, waited for before that unit's next forward.
// HYBRID_SHARD: FULL_SHARD over `group` (the node's ranks); each reduce-scattered gradient shard
// is then all-reduced over `replicas` (the ranks with the same local rank on the other nodes).
// NO_SHARD: the model's own buffers; each unit's gradient is all-reduced after its backward in
// the micro-batch where set_sync_gradients(true) (the last of a step), overlapping the backward
// of the units below.
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
#include "engine/fsdp/comm_thread.h"
#include "engine/fsdp/sharding_strategy.h"
#include "engine/model/llama_model.h"
#include "engine/parallel/process_group.h"
#include "engine/tensor.h"
#include "engine/train/param_view.h"

namespace air::engine::fsdp {

struct FsdpOptions {
  ShardingStrategy strategy = ShardingStrategy::kFullShard;
  // For a model created with ModelOptions::deferred_storage: gives unit `u` its storage and
  // fills it (LlamaModel::AllocateUnitStorage + io's LoadHfUnit). Apply calls it for one unit
  // at a time and keeps only this rank's shard before the next, so loading adds at most one
  // unit to what the rank holds afterwards. Unset: the model arrives with every unit loaded.
  std::function<Status(int unit)> load_unit;
};

// Bytes this rank holds for training state, by kind (for the memory figures).
struct FsdpMemory {
  int64_t parameters = 0;  // resident parameter storage (shards, or whole copies)
  int64_t gradients = 0;   // gradient shards or whole gradients
  int64_t gather = 0;      // gather / reduce slots (transient full units)
};

class Fsdp {
 public:
  // Shards `model` (already loaded with the same weights on every rank) over `group`. `comm`
  // runs every collective and must outlive this object. The hooks are removed on destruction.
  // HYBRID_SHARD: `group` is the node's ranks (the shards) and `replicas` the ranks holding the
  // same shard on the other nodes (gradients are reduce-scattered in the node, then all-reduced
  // across it); both must outlive this object. Other strategies: no `replicas`.
  static Result<std::unique_ptr<Fsdp>> Apply(LlamaModel& model, parallel::ProcessGroup& group,
                                             CommThread& comm, const FsdpOptions& options,
                                             parallel::ProcessGroup* replicas = nullptr);
  ~Fsdp();
  Fsdp(const Fsdp&) = delete;
  Fsdp& operator=(const Fsdp&) = delete;

  ShardingStrategy strategy() const { return options_.strategy; }
  int rank() const { return rank_; }
  int world_size() const { return world_; }

  // Starts a step's accumulation: zeroes this rank's gradient (shards, or whole for NO_SHARD).
  Status ZeroGrads();
  // NO_SHARD only: all-reduce the gradients in the next backward (the step's last micro-batch).
  void set_sync_gradients(bool sync) { sync_gradients_ = sync; }
  // Waits for every outstanding reduction; afterwards OptimizerViews' gradients hold the sum over
  // ranks. Returns the first communication error of the step.
  Status FinishGradients();
  // This rank's part of every trainable parameter (pieces of parameters in its shard), with
  // gradients; valid for the life of this object.
  const std::vector<train::ParamView>& OptimizerViews() const { return views_; }
  // Where OptimizerViews()[i] lies: its unit and first element within the unit's flat buffer.
  struct ViewPlace {
    int unit = 0;
    int64_t offset = 0;
  };
  const std::vector<ViewPlace>& view_places() const { return view_places_; }
  // True when every rank holds the whole gradient (NO_SHARD): the norm needs no all-reduce.
  bool gradients_replicated() const { return options_.strategy == ShardingStrategy::kNoShard; }
  // Collective: the sum over the shards of each rank's squared gradient-shard norm (over the
  // shard group only: HYBRID_SHARD's replicas hold the same shard).
  Result<double> SumOverShards(double local) const;
  // Whether this rank writes its shards into a checkpoint (HYBRID_SHARD: the first node only).
  bool writes_state() const { return replicas_ == nullptr || replicas_->rank() == 0; }
  // After the optimizer updated this rank's shards: SHARD_GRAD_OP starts the all-gathers of the
  // updated parameters; FULL_SHARD marks the root's gathered copy stale.
  Status AfterOptimizerStep();

  // Collective: every unit's whole parameters in turn, one unit at a time; rank 0 returns host
  // tensors of every parameter in the model's order, the other ranks an empty vector.
  Result<std::vector<Tensor>> GatherFullParameters();
  // Collective, for sharded checkpoints: this rank's flat parameter shard of unit u (S floats)
  // on the host, and writing it back (FULL_SHARD and SHARD_GRAD_OP; NO_SHARD: the whole unit).
  struct ShardRange {
    int64_t begin = 0;  // first element of the unit this rank owns
    int64_t count = 0;  // S (whole n for NO_SHARD)
    int64_t numel = 0;  // n
  };
  ShardRange Range(int unit) const;
  std::vector<float> ReadShard(int unit) const;
  Status WriteShard(int unit, const std::vector<float>& values);

  FsdpMemory memory() const;
  Status status() const { return error_; }
  double comm_seconds() const { return comm_->busy_seconds(); }
  double wait_seconds() const { return comm_->wait_seconds(); }

 private:
  struct Unit {
    int64_t numel = 0;                      // n
    int64_t shard = 0;                      // S
    std::unique_ptr<Buffer> values_buffer;  // FULL_SHARD: S; SHARD_GRAD_OP: P (resident)
    View values;
    std::unique_ptr<Buffer> grad_shard_buffer;  // sharded strategies: S
    View grad_shard;
    int slot = -1;                     // the gather / reduce slot this unit uses
    CommThread::Ticket gather = 0;     // an all-gather into its slot (or in place) in flight
    bool gathered = false;             // FULL_SHARD: its slot holds its current parameters
    CommThread::Ticket allreduce = 0;  // NO_SHARD: its gradient all-reduce in flight
  };
  struct Slot {
    std::unique_ptr<Buffer> buffer;  // values (P max) | grads (P max) | reduced shard (S max)
    View values, grads, reduced;
    int gathered_unit = -1;  // whose parameters the values hold
    int reduce_unit = -1;    // whose reduce-scatter is in flight from `grads`
    CommThread::Ticket reduce = 0;
  };

  Fsdp(LlamaModel& model, parallel::ProcessGroup& group, CommThread& comm, FsdpOptions options,
       parallel::ProcessGroup* replicas);
  // FULL_SHARD and HYBRID_SHARD keep only shards and gather units into slots.
  bool gathers() const {
    return options_.strategy == ShardingStrategy::kFullShard ||
           options_.strategy == ShardingStrategy::kHybridShard;
  }
  Status Setup();
  void InstallHooks();
  View SlotValues(int unit) const;  // the first P of the unit's slot values
  View SlotGrads(int unit) const;
  View Padded(int unit) const;     // the unit's P-element gathered view (slot or resident)
  View ShardView(int unit) const;  // this rank's resident range of the unit (ReadShard's)
  void Record(const Status& s);

  void StartGather(int unit);
  void WaitGather(int unit);
  void StartReduce(int unit);
  void FinishReduce(Slot& slot);
  void PrepareGrads(int unit);  // waits for the slot's previous reduce, zeroes, binds
  void BeforeForward(int unit);
  void BeforeBackward(int unit);
  void AfterBackward(int unit);

  LlamaModel* model_;
  parallel::ProcessGroup* group_;
  parallel::ProcessGroup* replicas_;  // HYBRID_SHARD only
  CommThread* comm_;
  const Backend* backend_;
  FsdpOptions options_;
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
