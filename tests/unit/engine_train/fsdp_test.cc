// FSDP (engine/fsdp) against one process: W ranks — threads of this test, each with its own
// backend, model and Gloo group over a real TCP store on localhost — train a tiny random Llama
// for a few optimizer steps of two micro-batches each, every rank on its own rows, and must end
// with the weights of one process that trained on all rows with the same loss normalization.
// Covers every strategy, uneven shards (3 ranks: padded tails), the prefetch and slot reuse
// across micro-batches, activation checkpointing under FULL_SHARD, the sharded gradient norm and
// the consolidated gather. The measured differences are printed; the bound is 10x of them.
// bf16 mixed precision: W ranks against one rank (a group of one, the same path) with the same
// policy — bf16 all-gathers and bf16 reduce-scatters with fp32 accumulation.
// Frozen parameters (LoRA's base: model/parameter.h's frozen segment) mixed with trainable ones
// in the same units, and a wholly frozen unit, under every strategy: the same oracle.
// Also: a deferred model loaded unit by unit never holds the whole model on a rank.
#include "engine/fsdp/fsdp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <thread>

#include "base/env.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/registry.h"
#include "engine/dtype.h"
#include "engine/model/llama_model.h"
#include "engine/parallel/gloo_process_group.h"
#include "engine/train/adamw.h"
#include "engine/train/grad_clip.h"
#include "unit/engine_train/tiny_llama.h"

namespace air::engine::fsdp {
namespace {

constexpr int kVocab = air::testing::kTinyLlamaVocab;
constexpr int kSteps = 3;
constexpr int kMicro = 2;

ModelConfig TinyConfig() { return air::testing::TinyLlamaConfig(/*num_layers=*/3); }

// The batch of (step, micro-batch, rank): 2 rows of 9 tokens with a different prompt mask each.
TokenBatch BatchFor(int step, int micro, int rank) {
  TokenBatch b;
  b.batch_size = 2;
  b.seq_len = 9;
  uint32_t x = 1000u * step + 100u * micro + 10u * rank + 1u;
  for (int r = 0; r < b.batch_size; ++r) {
    for (int t = 0; t < b.seq_len; ++t) {
      x = x * 1103515245u + 12345u;
      const int32_t id = static_cast<int32_t>((x >> 16) % kVocab);
      b.input_ids.push_back(id);
      b.labels.push_back(t < 1 + (rank + micro + r) % 4 ? kIgnoreIndex : id);
      b.position_ids.push_back(t);
      b.segment_ids.push_back(1);
    }
  }
  return b;
}

int64_t LossTokens(int step, int world) {
  int64_t n = 0;
  for (int m = 0; m < kMicro; ++m) {
    for (int r = 0; r < world; ++r) n += BatchFor(step, m, r).CountLossTokens();
  }
  return n;
}

constexpr double kMaxNorm = 0.5;  // small enough that clipping acts
train::AdamWOptions Adam() { return {.weight_decay = 0.1}; }
double Lr(int step) { return 0.01 / (1 + step); }

// With `frozen`: the attention projections and w1 of every layer, all of layer 1, the embedding
// and the final norm are frozen — units that mix both segments, a unit without trainable
// parameters, and a root unit whose only trainable parameter is the head.
std::unique_ptr<LlamaModel> TinyModel(const MixedPrecision& precision, bool frozen = false,
                                      const BackendOptions& backend = {.kind = "reference"}) {
  auto model = LlamaModel::Create(
      TinyConfig(), *CreateBackend(backend),
      {.compute_dtype = precision.param_dtype, .buffer_dtype = precision.buffer_dtype});
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  (*model)->InitWeights(7);
  if (frozen) {
    for (const Parameter& p : (*model)->parameters()) {
      const std::string& n = p.name;
      if (n.find(".attention.w") != std::string::npos || n.find(".w1.") != std::string::npos ||
          n.starts_with("layers.1.") || n == "tok_embeddings.weight" || n == "norm.weight") {
        EXPECT_TRUE((*model)->SetTrainable(n, false).ok()) << n;
      }
    }
  }
  return std::move(*model);
}

// One process over every rank's rows: the oracle. It trains through FSDP over a group of one,
// the path every single-process run takes.
std::vector<Tensor> TrainOneProcess(int world, bool checkpointing,
                                    const MixedPrecision& precision = {}, bool frozen = false) {
  auto model = TinyModel(precision, frozen);
  model->set_checkpointed_layers(std::vector<bool>(3, checkpointing));
  auto group = parallel::SingleProcessGroup();
  parallel::CommThread comm;
  auto fsdp = Fsdp::Apply(*model, *group, comm,
                          {.strategy = ShardingStrategy::kFullShard, .precision = precision});
  EXPECT_TRUE(fsdp.ok()) << fsdp.status().ToString();
  Fsdp& f = **fsdp;
  EXPECT_EQ(f.effective_strategy(), ShardingStrategy::kNoShard);  // nothing to shard
  const auto& params = f.OptimizerViews();
  auto adam = train::AdamW::Create(params, Adam(), model->backend());
  View slot;
  auto slot_buffer = model->backend().AllocateView(DType::kF64, {1}, &slot);
  for (int step = 0; step < kSteps; ++step) {
    const double n = static_cast<double>(LossTokens(step, world));
    EXPECT_TRUE(f.ZeroGrads().ok());
    for (int m = 0; m < kMicro; ++m) {
      for (int r = 0; r < world; ++r) {
        const TokenBatch batch = BatchFor(step, m, r);
        const float scale = static_cast<float>(batch.CountLossTokens() / n);
        EXPECT_TRUE(model->Forward(batch, {.loss_scale = scale}).ok());
        EXPECT_TRUE(model->Backward().ok());
      }
    }
    EXPECT_TRUE(f.FinishGradients().ok());
    const double norm = train::GlobalGradNorm(params, model->backend(), slot);
    (*adam)->Step(Lr(step), train::ClipCoefficient(norm, kMaxNorm));
    EXPECT_TRUE(f.AfterOptimizerStep().ok());
  }
  auto full = f.GatherFullParameters();
  EXPECT_TRUE(full.ok());
  return *full;
}

// Rank `rank` of a `world`-rank Gloo group on this host (one thread of this test per rank).
Result<std::unique_ptr<parallel::ProcessGroup>> JoinGroup(int rank, int world, int port) {
  parallel::DistEnv dist;
  dist.rank = rank;
  dist.world_size = world;
  dist.local_rank = rank;
  dist.local_world_size = world;
  dist.master_addr = "127.0.0.1";
  dist.master_port = port;
  dist.launcher = "test";
  return parallel::CreateGlooProcessGroup(dist, {});
}

// How a rank's parameters and gradients travel: the host data group (the CPU's memory), or
// staged through the host from the backend's memory (parallel/data_group.h), on `device`.
struct Transport {
  bool staged = false;
  BackendOptions backend = {.kind = "reference"};
};

// Rank `rank` of `world` under `strategy`; rank 0 returns the gathered weights.
std::vector<Tensor> TrainRank(int rank, int world, int port, ShardingStrategy strategy,
                              bool checkpointing, const MixedPrecision& precision, bool frozen,
                              Status* failure, const Transport& transport = {}) {
  auto group = JoinGroup(rank, world, port);
  if (!group.ok()) {
    *failure = group.status();
    return {};
  }
  auto model = TinyModel(precision, frozen, transport.backend);
  model->set_checkpointed_layers(std::vector<bool>(3, checkpointing));
  parallel::CommThread comm;
  std::unique_ptr<parallel::DataGroup> data;
  if (transport.staged) {
    data = parallel::StagedDataGroup(**group, comm, model->backend(),
                                     *CreateBackend(transport.backend));
  }
  auto fsdp = Fsdp::Apply(*model, **group, comm,
                          {.strategy = strategy, .precision = precision, .data = data.get()});
  if (!fsdp.ok()) {
    *failure = fsdp.status();
    return {};
  }
  Fsdp& f = **fsdp;
  const auto& params = f.OptimizerViews();
  auto adam = train::AdamW::Create(params, Adam(), model->backend());
  View slot;
  auto slot_buffer = model->backend().AllocateView(DType::kF64, {1}, &slot);
  for (int step = 0; step < kSteps; ++step) {
    const double n = static_cast<double>(LossTokens(step, world));
    EXPECT_TRUE(f.ZeroGrads().ok());
    for (int m = 0; m < kMicro; ++m) {
      f.set_sync_gradients(m + 1 == kMicro);
      const TokenBatch batch = BatchFor(step, m, rank);
      auto out =
          model->Forward(batch, {.loss_scale = static_cast<float>(batch.CountLossTokens() / n)});
      EXPECT_TRUE(out.ok());
      EXPECT_TRUE(model->Backward().ok());
    }
    EXPECT_TRUE(f.FinishGradients().ok()) << f.status().ToString();
    model->backend().Zero(slot);
    train::AddSquaredGradNorm(params, model->backend(), slot);
    double squared = model->backend().ReadScalar(slot);
    if (!f.gradients_replicated()) {
      EXPECT_TRUE(comm.Run([&] {
                        return (*group)->AllReduce(&squared, 1, parallel::CommDType::kF64,
                                                   parallel::ReduceOp::kSum);
                      })
                      .ok());
    }
    (*adam)->Step(Lr(step), train::ClipCoefficient(std::sqrt(squared), kMaxNorm));
    EXPECT_TRUE(f.AfterOptimizerStep().ok());
  }
  auto full = f.GatherFullParameters();
  if (!full.ok()) {
    *failure = full.status();
    return {};
  }
  return *full;
}

// max over tensors of max |a - b| / max |b| (per tensor).
double MaxRelativeDiff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double diff = 0, scale = 1e-30;
    for (int64_t k = 0; k < a[i].numel(); ++k) {
      diff = std::max(diff, static_cast<double>(std::abs(a[i][k] - b[i][k])));
      scale = std::max(scale, static_cast<double>(std::abs(b[i][k])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// Per tensor ||a - b|| / ||b||, the worst over tensors.
double MaxL2RelativeDiff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double num = 0, den = 1e-60;
    for (int64_t k = 0; k < a[i].numel(); ++k) {
      const double d = static_cast<double>(a[i][k]) - b[i][k];
      num += d * d;
      den += static_cast<double>(b[i][k]) * b[i][k];
    }
    worst = std::max(worst, std::sqrt(num / den));
  }
  return worst;
}

enum class Policy { kFp32, kBf16ParamsFp32Reduce, kBf16 };

MixedPrecision PolicyOf(Policy p) {
  switch (p) {
    case Policy::kBf16ParamsFp32Reduce:
      return {.param_dtype = DType::kBF16, .reduce_dtype = DType::kF32};
    case Policy::kBf16:
      return Bf16Policy();
    default:
      return {};
  }
}

struct Case {
  ShardingStrategy strategy;
  int world;
  bool checkpointing;
  Policy policy = Policy::kFp32;
  bool frozen = false;
};

// Every rank's run on `transport`, rank 0's gathered weights.
std::vector<Tensor> TrainRanks(const Case& c, const Transport& transport) {
  auto port = DefaultEnv()->PickFreePort();
  EXPECT_TRUE(port.ok());
  const MixedPrecision precision = PolicyOf(c.policy);
  std::vector<std::vector<Tensor>> results(static_cast<size_t>(c.world));
  std::vector<Status> failures(static_cast<size_t>(c.world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < c.world; ++r) {
    ranks.emplace_back([&, r] {
      results[static_cast<size_t>(r)] =
          TrainRank(r, c.world, *port, c.strategy, c.checkpointing, precision, c.frozen,
                    &failures[static_cast<size_t>(r)], transport);
    });
  }
  for (auto& t : ranks) t.join();
  for (const Status& s : failures) EXPECT_TRUE(s.ok()) << s.ToString();
  for (int r = 1; r < c.world; ++r) EXPECT_TRUE(results[static_cast<size_t>(r)].empty());
  return results[0];
}

class FsdpTest : public ::testing::TestWithParam<Case> {};

TEST_P(FsdpTest, MatchesOneProcessOnAllRows) {
  const Case c = GetParam();
  const MixedPrecision precision = PolicyOf(c.policy);
  const std::vector<Tensor> gathered = TrainRanks(c, {});
  const std::vector<Tensor> oracle = TrainOneProcess(c.world, c.checkpointing, precision, c.frozen);
  ASSERT_EQ(gathered.size(), oracle.size());
  const double diff = MaxRelativeDiff(gathered, oracle);
  const double l2 = MaxL2RelativeDiff(gathered, oracle);
  const char* policy[] = {"", ", bf16 params + fp32 reductions", ", bf16"};
  std::printf("%s, %d ranks%s%s%s: max relative weight difference %.3g (L2 %.3g) after %d steps\n",
              ShardingStrategyName(c.strategy), c.world, c.checkpointing ? ", checkpointing" : "",
              policy[static_cast<int>(c.policy)], c.frozen ? ", frozen base" : "", diff, l2,
              kSteps);
  if (c.policy != Policy::kBf16) {
    // Only the summation order of the reductions differs (ranks sum in Gloo's order; the
    // one-rank run accumulates micro-batches in its gradient buffer): float rounding. bf16
    // parameters are gathered exactly (the same bf16 values one rank computes with).
    EXPECT_LT(diff, 1e-5);
  } else {
    // Gradients also travel in bf16 (rounded once per reduction) where one rank's never do.
    // AdamW's first steps move every weight by about lr whatever the gradient's size, so an
    // element whose gradient is near zero can flip its update's sign: the per-element maximum
    // is large by construction; the L2 difference measures the run.
    EXPECT_LT(l2, 1e-1);
  }
  // And training moved the weights (a no-op FSDP would fail here).
  const std::vector<Tensor> initial = [] {
    auto m = TinyModel(MixedPrecision{});
    std::vector<Tensor> out;
    for (const Parameter& p : m->parameters()) out.push_back(m->backend().ToHostTensor(p.value));
    return out;
  }();
  EXPECT_GT(MaxRelativeDiff(gathered, initial), 1e-2);
  if (c.frozen) {  // the frozen parameters came back as they started, in param_dtype
    auto reference = TinyModel(precision, true);
    for (size_t i = 0; i < initial.size(); ++i) {
      const Parameter& p = reference->parameters()[i];
      if (p.trainable) continue;
      Tensor start = reference->backend().ToHostTensor(p.value);
      if (precision.param_dtype == DType::kBF16) {
        for (int64_t k = 0; k < start.numel(); ++k) start[k] = Bf16ToF32(F32ToBf16(start[k]));
      }
      EXPECT_EQ(MaxRelativeDiff({gathered[i]}, {start}), 0.0) << p.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, FsdpTest,
    ::testing::Values(
        Case{ShardingStrategy::kFullShard, 2, false}, Case{ShardingStrategy::kFullShard, 3, true},
        Case{ShardingStrategy::kShardGradOp, 2, false},
        Case{ShardingStrategy::kShardGradOp, 3, false}, Case{ShardingStrategy::kNoShard, 2, false},
        Case{ShardingStrategy::kNoShard, 3, false},
        Case{ShardingStrategy::kFullShard, 3, true, Policy::kBf16ParamsFp32Reduce},
        Case{ShardingStrategy::kShardGradOp, 2, false, Policy::kBf16ParamsFp32Reduce},
        Case{ShardingStrategy::kFullShard, 2, false, Policy::kBf16},
        Case{ShardingStrategy::kFullShard, 3, true, Policy::kBf16},
        Case{ShardingStrategy::kShardGradOp, 3, false, Policy::kBf16},
        Case{ShardingStrategy::kNoShard, 2, false, Policy::kBf16},
        Case{ShardingStrategy::kFullShard, 3, true, Policy::kFp32, true},
        Case{ShardingStrategy::kShardGradOp, 2, false, Policy::kFp32, true},
        Case{ShardingStrategy::kNoShard, 2, false, Policy::kFp32, true},
        Case{ShardingStrategy::kFullShard, 2, true, Policy::kBf16ParamsFp32Reduce, true}));

// The staged data group (device memory through pinned host buffers) on the CPU gives the host
// group's bits: the staging copies are exact and the host collectives the same. On a GPU (when
// one is usable) every rank's model lives on cuda:0 — N ranks on one GPU, which NCCL refuses —
// and the run follows one CPU process within a measured bound.
TEST(FsdpStagedTest, StagedThroughTheHostGivesTheHostGroupsBitsAndRunsRanksOnOneGpu) {
  for (const Case& c :
       {Case{ShardingStrategy::kFullShard, 3, true, Policy::kBf16},
        Case{ShardingStrategy::kShardGradOp, 2, false, Policy::kFp32, true},
        Case{ShardingStrategy::kNoShard, 2, false, Policy::kBf16ParamsFp32Reduce}}) {
    const std::vector<Tensor> host = TrainRanks(c, {});
    const std::vector<Tensor> staged = TrainRanks(c, {.staged = true});
    ASSERT_EQ(host.size(), staged.size());
    for (size_t i = 0; i < host.size(); ++i) {
      ASSERT_EQ(std::vector<float>(host[i].values().begin(), host[i].values().end()),
                std::vector<float>(staged[i].values().begin(), staged[i].values().end()))
          << ShardingStrategyName(c.strategy) << " tensor " << i;
    }
    if (!VisibleGpuCount().ok()) continue;
    const Device gpu{DeviceType::kCuda, 0};
    const std::vector<Tensor> on_gpu = TrainRanks(c, {.staged = true, .backend = ForDevice(gpu)});
    const std::vector<Tensor> oracle =
        TrainOneProcess(c.world, c.checkpointing, PolicyOf(c.policy), c.frozen);
    const double l2 = MaxL2RelativeDiff(on_gpu, oracle);
    std::printf(
        "%s, %d ranks on one GPU (staged): L2 relative weight difference to one CPU "
        "process %.3g\n",
        ShardingStrategyName(c.strategy), c.world, l2);
    EXPECT_LT(l2, 1e-1);
  }
}

TEST(FsdpMemoryTest, AGroupOfOneHoldsTheWholeMasterAndABf16ComputeCopy) {
  for (bool bf16 : {false, true}) {
    const MixedPrecision precision = bf16 ? Bf16Policy() : MixedPrecision{};
    auto group = parallel::SingleProcessGroup();
    auto model = TinyModel(precision);
    const int64_t n = model->NumParameters();
    parallel::CommThread comm;
    auto fsdp = Fsdp::Apply(*model, *group, comm,
                            {.strategy = ShardingStrategy::kFullShard, .precision = precision});
    ASSERT_TRUE(fsdp.ok()) << fsdp.status().ToString();
    // fp32 master (4 bytes) plus, under bf16, the bf16 copy the model computes with (2 bytes).
    EXPECT_EQ((*fsdp)->memory().parameters, n * (bf16 ? 6 : 4));
    EXPECT_EQ((*fsdp)->memory().gradients, n * 4);
    for (const ParamGroup& g : model->units()) EXPECT_TRUE(g.external);
    for (const Parameter& p : model->parameters()) {
      EXPECT_EQ(p.value.dtype(), bf16 ? DType::kBF16 : DType::kF32) << p.name;
    }
  }
}

TEST(FsdpApplyTest, TheModelMustComputeInTheParamDtype) {
  auto group = parallel::SingleProcessGroup();
  auto model = TinyModel(MixedPrecision{});
  parallel::CommThread comm;
  auto fsdp = Fsdp::Apply(*model, *group, comm, {.precision = Bf16Policy()});
  ASSERT_FALSE(fsdp.ok());
  EXPECT_NE(fsdp.status().message().find("param_dtype BF16"), std::string::npos)
      << fsdp.status().ToString();
}

TEST(FsdpMemoryTest, FrozenParametersKeepOnlyTheirParamDtypeValues) {
  // No fp32 master, no gradient, no optimizer view for a frozen parameter: its segment is held
  // in param_dtype only (sharded over 2 ranks under FULL_SHARD), in the same units as the
  // trainable ones.
  auto port = DefaultEnv()->PickFreePort();
  ASSERT_TRUE(port.ok());
  std::vector<FsdpMemory> held(2);
  std::vector<int64_t> trainable(2), frozen(2), views(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto group = JoinGroup(r, 2, *port);
      ASSERT_TRUE(group.ok());
      auto model = TinyModel(Bf16Policy(), true);
      for (const Parameter& p : model->parameters())
        (p.trainable ? trainable : frozen)[r] += p.numel();
      parallel::CommThread comm;
      auto fsdp =
          Fsdp::Apply(*model, **group, comm,
                      {.strategy = ShardingStrategy::kFullShard, .precision = Bf16Policy()});
      ASSERT_TRUE(fsdp.ok()) << fsdp.status().ToString();
      held[r] = (*fsdp)->memory();
      for (const train::ParamView& v : (*fsdp)->OptimizerViews()) {
        EXPECT_TRUE(model->FindParameter(v.name)->trainable) << v.name;
        views[r] += v.numel;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    // Each rank: about half of each segment (padding: at most one element per unit per rank).
    const int64_t units = 4;
    EXPECT_LE(held[r].frozen, (frozen[r] / 2 + units) * 2);  // bf16 shards
    EXPECT_GE(held[r].frozen, frozen[r] / 2 * 2);
    EXPECT_LE(held[r].parameters, (trainable[r] / 2 + units) * 4);  // fp32 master shards only
    EXPECT_LE(held[r].gradients, (trainable[r] / 2 + units) * 4);
    EXPECT_EQ(views[0] + views[1], trainable[0]);  // the optimizer sees the trainable ones once
  }
}

ModelConfig DeepConfig() {
  ModelConfig c = TinyConfig();
  c.num_layers = 24;  // many small units: the whole model dwarfs a unit and the slots
  return c;
}

struct LoadedRank {
  int64_t peak = 0;  // bytes, from the model's creation to the end of Fsdp::Apply
  int64_t held = 0;  // bytes after Apply
  std::vector<Tensor> gathered;
  Status failure;
};

// Copies `source`'s values of one unit into `model`'s (both CPU: through the host).
void CopyUnit(const LlamaModel& source, LlamaModel& model, int unit) {
  const auto& from = source.units()[static_cast<size_t>(unit)].params;
  const auto& to = model.units()[static_cast<size_t>(unit)].params;
  for (size_t i = 0; i < from.size(); ++i) {
    Tensor host = source.backend().ToHostTensor(from[i]->value);
    model.backend().CopyToDevice(to[i]->value, host.data());
  }
}

LoadedRank LoadRank(int rank, int world, int port, bool by_unit, const LlamaModel& source) {
  LoadedRank out;
  auto group = JoinGroup(rank, world, port);
  if (!group.ok()) {
    out.failure = group.status();
    return out;
  }
  auto backend = std::make_shared<ReferenceOps>();  // its allocation_stats: one rank's memory
  auto model = LlamaModel::Create(DeepConfig(), backend, {.deferred_storage = by_unit});
  if (!model.ok()) {
    out.failure = model.status();
    return out;
  }
  LlamaModel& m = **model;
  FsdpOptions options{.strategy = ShardingStrategy::kFullShard};
  if (by_unit) {
    options.load_unit = [&](int u) -> Status {
      AIR_RETURN_IF_ERROR(m.AllocateUnitStorage(u));
      CopyUnit(source, m, u);
      return Status::Ok();
    };
  } else {
    for (int u = 0; u <= m.root_unit(); ++u) CopyUnit(source, m, u);
  }
  parallel::CommThread comm;
  auto fsdp = Fsdp::Apply(m, **group, comm, options);
  if (!fsdp.ok()) {
    out.failure = fsdp.status();
    return out;
  }
  out.peak = static_cast<int64_t>(backend->allocation_stats().peak_bytes);
  out.held = static_cast<int64_t>(backend->allocation_stats().in_use_bytes);
  auto gathered = (*fsdp)->GatherFullParameters();
  if (!gathered.ok()) out.failure = gathered.status();
  if (gathered.ok()) out.gathered = std::move(*gathered);
  return out;
}

TEST(FsdpLoadTest, LoadingUnitByUnitNeverHoldsTheWholeModel) {
  constexpr int kWorld = 4;
  auto made = LlamaModel::Create(DeepConfig(), *CreateBackend({.kind = "reference"}));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  LlamaModel& source = **made;
  source.InitWeights(11);
  const int64_t whole = source.NumParameters() * 4;
  int64_t largest_unit = 0;
  for (const ParamGroup& g : source.units()) largest_unit = std::max(largest_unit, g.numel * 4);

  std::map<bool, LoadedRank> rank0;
  for (bool by_unit : {false, true}) {
    auto port = DefaultEnv()->PickFreePort();
    ASSERT_TRUE(port.ok());
    std::vector<LoadedRank> ranks(kWorld);
    std::vector<std::thread> threads;
    for (int r = 0; r < kWorld; ++r) {
      threads.emplace_back([&, r] { ranks[r] = LoadRank(r, kWorld, *port, by_unit, source); });
    }
    for (auto& t : threads) t.join();
    for (const LoadedRank& r : ranks) ASSERT_TRUE(r.failure.ok()) << r.failure.ToString();
    // Every rank's shard holds exactly the source's values (rank 0 gathers them all).
    ASSERT_EQ(ranks[0].gathered.size(), source.parameters().size());
    for (size_t i = 0; i < source.parameters().size(); ++i) {
      Tensor want = source.backend().ToHostTensor(source.parameters()[i].value);
      ASSERT_EQ(want.numel(), ranks[0].gathered[i].numel());
      for (int64_t k = 0; k < want.numel(); ++k) {
        ASSERT_EQ(want[k], ranks[0].gathered[i][k]) << source.parameters()[i].name;
      }
    }
    for (const LoadedRank& r : ranks) {
      std::printf("%s: whole model %lld B, rank peak %lld B, held after Apply %lld B\n",
                  by_unit ? "unit by unit" : "all at once", static_cast<long long>(whole),
                  static_cast<long long>(r.peak), static_cast<long long>(r.held));
    }
    rank0[by_unit] = ranks[0];
  }
  EXPECT_GE(rank0[false].peak, whole);  // all at once: the whole model, then the shards
  const LoadedRank& r = rank0[true];
  EXPECT_LE(r.peak, r.held + largest_unit);  // loading added at most one unit
  EXPECT_LT(r.peak, whole);
}

TEST(ShardingStrategyTest, NamesAndHfStrings) {
  EXPECT_EQ(ParseShardingStrategy("full_shard"), ShardingStrategy::kFullShard);
  EXPECT_EQ(ParseShardingStrategy("SHARD_GRAD_OP"), ShardingStrategy::kShardGradOp);
  EXPECT_EQ(ParseShardingStrategy("ddp"), ShardingStrategy::kNoShard);
  EXPECT_FALSE(ParseShardingStrategy("zero3").has_value());
  EXPECT_EQ(ParseHfFsdpOption("full_shard auto_wrap").strategy, ShardingStrategy::kFullShard);
  EXPECT_EQ(ParseHfFsdpOption("shard_grad_op").strategy, ShardingStrategy::kShardGradOp);
  EXPECT_EQ(ParseHfFsdpOption("").strategy, ShardingStrategy::kNoShard);
  EXPECT_NE(ParseHfFsdpOption("full_shard offload").error.find("offload"), std::string::npos);
  EXPECT_NE(ParseHfFsdpOption("full_shard shard_grad_op").error.find("two"), std::string::npos);
  EXPECT_NE(ParseHfFsdpOption("fullshard").error.find("fullshard"), std::string::npos);
}

}  // namespace
}  // namespace air::engine::fsdp
