// The stages of `air train` (see train_run.h).
#include "engine/train/train_run.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "base/strings.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/backend/cpu/gemm_path.h"
#include "engine/backend/cpu/thread_pool.h"
#include "engine/backend/registry.h"
#include "engine/data/dataset.h"
#include "engine/data/examples.h"
#include "engine/data/tokenizer.h"
#include "engine/io/hf_config.h"
#include "engine/io/hf_hub.h"
#include "engine/io/hf_state_dict.h"
#include "engine/model/memory_check.h"
#include "engine/model/model_factory.h"
#include "engine/parallel/data_group.h"
#include "engine/parallel/dist_env.h"
#include "engine/parallel/gloo_process_group.h"
#include "engine/parallel/nccl_data_group.h"
#include "engine/train/activation_checkpointing.h"
#include "engine/train/pretokenized_dataset.h"
#include "engine/train/train_lora.h"

namespace air::engine::train {

namespace {

// Re-labels an error from a stage with the parameter (and its YAML location) that led there.
Status AtParameter(const TrainConfig& config, const std::string& field, const Status& status) {
  return Status(status.code(), fmt::format("{}: {}", config.Where(field), status.message()));
}

// The DataLoader options for the trainer's parameters: this rank's rows of every global batch.
DataLoaderOptions LoaderOptions(const TrainConfig& config, const parallel::DistEnv& dist) {
  DataLoaderOptions o;
  o.rank = dist.rank;
  o.world_size = dist.world_size;
  o.batch_size = config.per_device_batch_size;
  o.micro_batches_per_step = config.gradient_accumulation_steps;
  o.seq_len = config.max_seq_len;
  o.packing = config.packing;
  o.group_by_length = true;
  o.shuffle = true;
  o.seed = static_cast<uint64_t>(config.seed);
  return o;
}

// global_batch_size -> gradient_accumulation_steps for this number of ranks.
Status DeriveAccumulation(const parallel::DistEnv& dist, TrainConfig& config) {
  if (config.global_batch_size <= 0) return Status::Ok();
  const int64_t micro = int64_t{config.per_device_batch_size} * dist.world_size;
  if (config.global_batch_size % micro != 0) {
    const int64_t below = config.global_batch_size / micro * micro;
    const int64_t above = below + micro;
    return InvalidArgument(fmt::format(
        "{}: {} sequences cannot be split over {} rank{} of per_device_batch_size {} ({} "
        "sequences a micro-batch): valid are multiples of {} ({}{}), or a per_device_batch_size "
        "that divides {}",
        config.Where("global_batch_size"), config.global_batch_size, dist.world_size,
        dist.world_size == 1 ? "" : "s", config.per_device_batch_size, micro, micro,
        below > 0 ? fmt::format("{} or ", below) : std::string(), above,
        config.global_batch_size % dist.world_size == 0
            ? fmt::format("{} (the global batch / {} ranks)",
                          config.global_batch_size / dist.world_size, dist.world_size)
            : fmt::format("the global batch on a number of ranks that divides it")));
  }
  config.gradient_accumulation_steps = static_cast<int>(config.global_batch_size / micro);
  return Status::Ok();
}

// examples -> p.loader, with the DataLoader's errors pointing at the parameters.
Status MakeLoader(const TrainConfig& config, std::vector<TokenizedExample> examples, int32_t pad_id,
                  PreparedTraining& p) {
  p.num_examples = static_cast<int64_t>(examples.size());
  auto loader = DataLoader::Create(std::move(examples), pad_id, LoaderOptions(config, p.dist));
  if (!loader.ok()) return AtParameter(config, "dataset_name", loader.status());
  p.loader = std::make_unique<DataLoader>(std::move(*loader));
  return Status::Ok();
}

// dataset_name -> examples -> a DataLoader, filling p.loader, p.dataset_kind, p.num_examples.
Status PrepareData(Env* env, const TrainConfig& config, PreparedTraining& p) {
  const std::string& data = config.dataset_name;
  if (LooksPretokenized(env, data)) {
    auto examples = ReadPretokenizedJsonl(env, data, p.model_config.vocab_size);
    if (!examples.ok()) return AtParameter(config, "dataset_name", examples.status());
    p.dataset_kind = "pre-tokenized JSONL";
    return MakeLoader(config, std::move(*examples), /*pad_id=*/0, p);
  }

  auto files = ResolveDataset(data, env);
  if (!files.ok()) return AtParameter(config, "dataset_name", files.status());
  auto records = LoadRecords(*files, env);
  if (!records.ok()) return AtParameter(config, "dataset_name", records.status());
  auto tokenizer = Tokenizer::Load(p.model_dir, env);
  if (!tokenizer.ok()) return AtParameter(config, "model_name", tokenizer.status());
  if (tokenizer->id_limit() > p.model_config.vocab_size) {
    return InvalidArgument(fmt::format(
        "{}: the tokenizer in {} has ids up to {} but the model's vocab_size is {}; the model "
        "cannot embed them",
        config.Where("model_name"), p.model_dir, tokenizer->id_limit() - 1,
        p.model_config.vocab_size));
  }
  ExampleOptions options;
  options.max_seq_len = config.max_seq_len;
  options.train_on_prompt = config.train_on_prompt;
  auto built = BuildExamples(*records, *tokenizer, options);
  if (!built.ok()) return AtParameter(config, "dataset_name", built.status());
  if (built->examples.empty()) {
    return InvalidArgument(
        fmt::format("{}: {}: no example has anything to learn ({} records, {} "
                    "dropped because their response was cut off by "
                    "max_seq_len {})",
                    config.Where("dataset_name"), data, built->stats.records,
                    built->stats.dropped_no_loss, config.max_seq_len));
  }
  bool chat = false;
  for (const DatasetRecord& r : *records) chat |= r.kind == DatasetRecord::Kind::kChat;
  p.dataset_kind = chat ? "chat records" : "alpaca records";
  if (built->stats.truncated > 0 || built->stats.dropped_no_loss > 0) {
    p.notes.push_back(
        fmt::format("{} examples were cut to max_seq_len {}; {} dropped (no "
                    "response left)",
                    built->stats.truncated, config.max_seq_len, built->stats.dropped_no_loss));
  }
  return MakeLoader(config, std::move(built->examples), tokenizer->padding_id(), p);
}

// output_dir must be a directory air can create or write, and not the model's own directory (the
// checkpoint would overwrite the weights being fine-tuned). Checked before anything is loaded,
// and without creating anything (--dry-run writes nothing).
Status CheckOutputDir(const TrainConfig& config, const std::string& model_dir) {
  namespace fs = std::filesystem;
  const std::string& out = config.output_dir;
  std::error_code ec;
  fs::path existing = fs::absolute(out, ec);
  if (ec) {
    return InvalidArgument(
        fmt::format("{}: {}: {}", config.Where("output_dir"), out, ec.message()));
  }
  // The nearest part of the path that exists: output_dir itself, or where it would be created.
  while (!fs::exists(existing, ec) && existing.has_relative_path()) {
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, ec)) {
    const bool itself = existing == fs::absolute(out, ec);
    return InvalidArgument(fmt::format(
        "{}: {}{} is a file, not a directory; output_dir must name a directory (existing or not)",
        config.Where("output_dir"), itself ? "" : out + " cannot be created: ", existing.string()));
  }
  if (::access(existing.c_str(), W_OK | X_OK) != 0) {
    return PermissionDenied(fmt::format("{}: cannot write {}: {} is not writable",
                                        config.Where("output_dir"), out, existing.string()));
  }
  if (fs::exists(out, ec) && fs::equivalent(out, model_dir, ec)) {
    return InvalidArgument(fmt::format(
        "{}: {} is the model directory (model_name {}); the checkpoint would overwrite the "
        "weights being fine-tuned — choose another output_dir",
        config.Where("output_dir"), out, config.model_name));
  }
  return Status::Ok();
}

}  // namespace

Result<TrainConfig> LoadTrainConfig(Env* env, const std::string& config_path,
                                    const std::vector<std::string>& overrides) {
  std::string path = config_path;
  std::string origin = "--config";
  if (path.empty()) {
    std::optional<std::string> from_env = env->GetEnv("HYPERPARAMETERS_PATH");
    if (from_env && !from_env->empty()) {
      path = *from_env;
      origin = "HYPERPARAMETERS_PATH";
    }
  }
  if (path.empty()) {
    if (overrides.empty()) {
      return InvalidArgument(
          "no training parameters: give --config FILE, or set HYPERPARAMETERS_PATH to a YAML "
          "file (air run does this for a workload's parameters block), or pass --set key=value");
    }
    return ParseTrainConfig("", "--set", overrides);
  }
  if (env->IsDirectory(path) || !env->FileExists(path)) {
    return InvalidArgument(fmt::format("{} {}: no such file", origin, path));
  }
  AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  return ParseTrainConfig(text, path, overrides);
}

Result<PreparedTraining> PrepareTraining(Env* env, TrainConfig config) {
  PreparedTraining p;
  // Under torchrun, air launch, air run or srun: this process's rank. Inconsistent launcher
  // variables are an error naming them.
  AIR_ASSIGN_OR_RETURN(p.dist, parallel::ReadDistEnv(env));
  // The device first: a missing GPU is reported before the model and data are read.
  AIR_ASSIGN_OR_RETURN(p.device, ResolveTrainingDevice(config, p.dist));
  if (!p.device.note.empty()) p.notes.push_back(p.device.note);
  if (p.dist.world_size > 1 && config.sharding_strategy == fsdp::ShardingStrategy::kHybridShard &&
      p.dist.world_size % p.dist.local_world_size != 0) {
    return InvalidArgument(fmt::format(
        "{}: HYBRID_SHARD shards within a node and replicates across nodes, so every node needs "
        "the same number of ranks; WORLD_SIZE {} is not a multiple of LOCAL_WORLD_SIZE {}",
        config.Where("fsdp_sharding_strategy"), p.dist.world_size, p.dist.local_world_size));
  }
  AIR_RETURN_IF_ERROR(DeriveAccumulation(p.dist, config));
  auto model_dir = ResolveModelDir(config.model_name, env);
  if (!model_dir.ok()) return AtParameter(config, "model_name", model_dir.status());
  p.model_dir = *model_dir;
  auto model_config = LoadModelConfig(p.model_dir);
  if (!model_config.ok()) return AtParameter(config, "model_name", model_config.status());
  p.model_config = *model_config;
  // Every tensor the model needs is there (GPT-OSS: every missing expert tensor by name); a
  // directory without weights files is reported when training loads them.
  if (auto weights = WeightReader::Open(p.model_dir); weights.ok()) {
    const Status complete = CheckHfCheckpoint(**weights, p.model_config);
    if (!complete.ok()) return AtParameter(config, "model_name", complete);
  }
  AIR_RETURN_IF_ERROR(CheckOutputDir(config, p.model_dir));
  p.config = config;
  AIR_RETURN_IF_ERROR(PrepareLora(env, p));  // may take the starting adapter's settings
  config = p.config;

  AIR_RETURN_IF_ERROR(PrepareData(env, config, p));
  const int64_t batches_per_epoch = p.loader->transformers_batches_per_epoch();
  const int64_t accumulation = config.gradient_accumulation_steps;
  const int64_t steps_per_epoch = StepsPerEpoch(config, *p.loader);
  if (config.max_steps < 0 && config.num_train_epochs * static_cast<double>(steps_per_epoch) >=
                                  static_cast<double>(kMaxTotalSteps)) {
    return InvalidArgument(
        fmt::format("{}: {} epochs of {} optimizer steps is more than {} steps; train fewer epochs",
                    config.Where("num_train_epochs"), config.num_train_epochs, steps_per_epoch,
                    kMaxTotalSteps));
  }
  p.total_steps = TotalSteps(config, steps_per_epoch);
  if (accumulation > batches_per_epoch) {
    p.notes.push_back(fmt::format(
        "gradient_accumulation_steps {} is more than the {} micro-batches of an epoch: each "
        "optimizer step reads a whole epoch, its last {} micro-batches only padding",
        accumulation, batches_per_epoch, accumulation - batches_per_epoch));
  }
  p.warmup_steps = config.WarmupStepsFor(p.total_steps);
  if (config.max_steps > 0 && config.sources.count("num_train_epochs") > 0) {
    p.notes.push_back(
        fmt::format("max_steps {} decides the length; num_train_epochs ({}) is not "
                    "used",
                    config.max_steps, config.Where("num_train_epochs")));
  }
  const bool on_cpu = p.device.device.type == DeviceType::kCpu;
  if (std::string problem = CpuKernelsSettingProblem(); on_cpu && !problem.empty()) {
    p.notes.push_back(problem);
  }
  if (on_cpu) {
    // AIR_CPU_PATH naming a path this CPU cannot run is refused here, before anything loads.
    AIR_ASSIGN_OR_RETURN(const GemmPathChoice gemm, ChooseGemmBf16Path());
    if (config.precision.param_dtype == DType::kBF16 && !gemm.fp32_math_note.empty()) {
      p.notes.push_back(gemm.fp32_math_note);
    }
  }
  p.config = std::move(config);
  return p;
}

namespace {

// How the training state divides among the ranks: the fp32 master, gradients and moments are
// sharded over the shard group (FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD within a node);
// NO_SHARD and a single process keep everything whole.
MemoryShare TrainingShare(const PreparedTraining& p) {
  MemoryShare share;
  const int world = p.dist.world_size;
  const fsdp::ShardingStrategy s = p.config.sharding_strategy;
  if (world <= 1 || s == fsdp::ShardingStrategy::kNoShard) return share;
  share.ranks_on_host = p.dist.local_world_size;
  const int shards = s == fsdp::ShardingStrategy::kHybridShard ? p.dist.local_world_size : world;
  share.per_rank = 1.0 / shards;
  share.how = fmt::format("{} over {} ranks", fsdp::ShardingStrategyName(s), shards);
  return share;
}

// Whether the strategy keeps a whole param_dtype copy resident (NO_SHARD and one process:
// the compute copy; SHARD_GRAD_OP: the unsharded parameters).
bool KeepsResidentCopy(const PreparedTraining& p) {
  return p.dist.world_size <= 1 || p.config.sharding_strategy == fsdp::ShardingStrategy::kNoShard ||
         p.config.sharding_strategy == fsdp::ShardingStrategy::kShardGradOp;
}

// The model's units (its decoder layers, then the root) as FSDP sizes them (with LoRA, as
// PrepareLora planned them: adapters trainable, the base frozen).
std::vector<fsdp::UnitSize> UnitSizes(const PreparedTraining& p) {
  if (p.config.lora.enabled) return p.lora_units;
  const int layers = p.model_config.num_layers;
  std::vector<fsdp::UnitSize> units(static_cast<size_t>(layers) + 1);
  for (const ParameterSpec& spec : ParameterSpecsFor(p.model_config)) {
    units[static_cast<size_t>(spec.layer < 0 ? layers : spec.layer)].trainable +=
        NumElements(spec.shape);
  }
  return units;
}

// The bytes per parameter of this run's training state (LoRA: the frozen base in param_dtype and
// the full 16 bytes only for the trained fraction).
ParameterBytes RunBytes(const PreparedTraining& p) {
  const DType dtype = p.config.precision.param_dtype;
  return p.config.lora.enabled
             ? LoraTrainingBytes(dtype, KeepsResidentCopy(p), p.lora_trainable_fraction)
             : TrainingBytes(dtype, KeepsResidentCopy(p), p.config.torch_dtype);
}

}  // namespace

TrainingMemory EstimateTrainingMemory(const PreparedTraining& p) {
  const ParameterBytes bytes = RunBytes(p);
  const MemoryShare share = TrainingShare(p);
  const TrainConfig& c = p.config;
  TrainingMemory m;
  m.parameters = ParameterCount(p.model_config);
  m.bytes_per_rank = m.parameters * (bytes.sharded * share.per_rank + bytes.whole);
  m.what = bytes.what + (share.how.empty() ? std::string() : " (" + share.how + ")");
  // The largest micro-batch the data gives (at most per_device_batch_size rows of max_seq_len).
  PassShape shape{.batch = p.loader->max_batch_rows(),
                  .seq = p.loader->max_row_tokens(),
                  .training = true,
                  .unfused_head = !c.fused_linear_cross_entropy,
                  // LoRA freezes the head unless modules_to_save may name it (then counted as
                  // trained: the larger chunk).
                  .head_gradient = !c.lora.enabled || !c.lora.modules_to_save.empty(),
                  .segments = true};
  shape.checkpointed.assign(static_cast<size_t>(p.model_config.num_layers),
                            c.activation_checkpointing);
  // The head weight's packed copies as the CPU backend takes them (FastOps::GemmPackedBBytes; a
  // GPU's products read the weight in place).
  if (p.device.gpu == nullptr) {
    const Result<GemmPathChoice> path = ChooseGemmBf16Path();  // checked when prepared
    if (path.ok()) {
      const int64_t vocab = p.model_config.vocab_size, dim = p.model_config.hidden_size;
      const DType dtype = c.precision.param_dtype;
      shape.head_packing = {GemmBf16PackedBBytes(path->path, vocab, dim, dtype),
                            GemmBf16PackedBBytes(path->path, dim, vocab, dtype)};
    }
  }
  m.activation_bytes =
      static_cast<double>(PassWorkspaceBytes(p.model_config, c.precision.param_dtype, shape)) +
      p.lora_scratch_bytes;
  const int shards = share.per_rank > 0 ? static_cast<int>(std::lround(1.0 / share.per_rank)) : 1;
  m.buffer_bytes =
      static_cast<double>(fsdp::SlotBytes(UnitSizes(p), shards, c.sharding_strategy, c.precision,
                                          c.lora.enabled ? DType::kF32 : c.torch_dtype));
  m.working = fmt::format("a micro-batch of {} x {}{}", shape.batch, shape.seq,
                          c.activation_checkpointing ? ", activation checkpointing" : "");
  return m;
}

int ThreadsPerRank(const PreparedTraining& p, int num_threads) {
  if (num_threads > 0) return num_threads;
  // Ranks on one host share its cores.
  return std::max(1, DefaultThreadCount() / std::max(1, p.dist.local_world_size));
}

// The plan's compute line: the CPU's threads and kernels, or the GPU and its free memory.
std::string DescribeCompute(const PreparedTraining& p, int threads) {
  const std::string precision = DescribePrecision(
      p.config.precision, p.config.lora.enabled ? DType::kF32 : p.config.torch_dtype);
  if (p.device.gpu != nullptr) {
    return fmt::format("{}, {} free, {}", p.device.description,
                       HumanBytes(p.device.memory.free_bytes), precision);
  }
  std::string gemm;
  if (p.config.precision.param_dtype == DType::kBF16) {
    const Result<GemmPathChoice> path = ChooseGemmBf16Path();  // checked when prepared
    if (path.ok()) {
      gemm = fmt::format(", bf16 GEMM {} ({})", DescribeGemmBf16Path(path->path), path->reason);
    }
  }
  return fmt::format("CPU, {}, {} thread{}, {} kernels{}", precision, threads,
                     threads == 1 ? "" : "s", CpuKernelsName(SelectedCpuKernels()), gemm);
}

int64_t GlobalBatchSize(const PreparedTraining& p) {
  return int64_t{p.config.per_device_batch_size} * p.dist.world_size *
         p.config.gradient_accumulation_steps;
}

std::string DescribePlan(const PreparedTraining& p, int num_threads) {
  const int threads = ThreadsPerRank(p, num_threads);
  const TrainConfig& c = p.config;
  const ModelConfig& m = p.model_config;
  std::string text = fmt::format(
      "model    {} ({}, {} layers, hidden {}, vocab {})\n"
      "data     {} ({}, {} examples, {} micro-batches of {} per epoch, max_seq_len {}{})\n"
      "steps    {} optimizer steps x {} micro-batches ({} sequences a step), lr {} ({}, warmup "
      "{}), weight decay {}, clip {}\n"
      "compute  {}\n"
      "output   {}",
      p.model_dir, ArchitectureClassName(m.arch), m.num_layers, m.hidden_size, m.vocab_size,
      c.dataset_name, p.dataset_kind, p.num_examples, p.loader->batches_per_epoch(),
      c.per_device_batch_size, c.max_seq_len,
      c.packing ? fmt::format(", packed: rows {:.0f}% full", 100.0 * p.loader->stats().fill)
                : std::string(", padded, grouped by length"),
      p.total_steps, c.gradient_accumulation_steps, GlobalBatchSize(p), c.learning_rate,
      LrSchedulerTypeName(c.lr_scheduler_type), p.warmup_steps, c.weight_decay, c.max_grad_norm,
      DescribeCompute(p, threads), c.output_dir);
  if (c.lora.enabled) text += "\nlora     " + p.lora_description;
  const TrainingMemory memory = EstimateTrainingMemory(p);
  text += fmt::format("\nmemory   {:.4g} B parameters: {} per rank for {}", memory.parameters / 1e9,
                      HumanBytes(static_cast<uint64_t>(memory.bytes_per_rank)), memory.what);
  if (!c.lora.enabled) {
    // The other way to keep the state, for comparison (the seed keeps it in bf16).
    const DType other = c.torch_dtype == DType::kF32 ? DType::kBF16 : DType::kF32;
    const DType compute = other == DType::kBF16 ? DType::kBF16 : c.precision.param_dtype;
    const ParameterBytes alt = TrainingBytes(compute, KeepsResidentCopy(p), other);
    const MemoryShare share = TrainingShare(p);
    text += fmt::format(" (with torch_dtype {}: {})", fsdp::TorchDTypeName(other),
                        HumanBytes(static_cast<uint64_t>(
                            memory.parameters * (alt.sharded * share.per_rank + alt.whole))));
  }
  text += fmt::format(
      "\n         + activations {} ({}){}: {} a rank in all",
      HumanBytes(static_cast<uint64_t>(memory.activation_bytes)), memory.working,
      memory.buffer_bytes > 0
          ? fmt::format(", FSDP buffers {}", HumanBytes(static_cast<uint64_t>(memory.buffer_bytes)))
          : std::string(),
      HumanBytes(static_cast<uint64_t>(memory.total_bytes_per_rank())));
  if (p.dist.world_size > 1) {
    // What parameters and gradients travel over (scalars always go over gloo).
    const std::string transport = p.device.gpu == nullptr ? "gloo"
                                  : c.ddp_backend == "gloo"
                                      ? "gloo, staged through page-locked host memory"
                                      : "nccl";
    text += fmt::format("\nranks    {} ({}), {} over {}", p.dist.world_size,
                        parallel::DescribeDistEnv(p.dist),
                        fsdp::ShardingStrategyName(c.sharding_strategy), transport);
    if (p.device.gpu == nullptr) {
      text += fmt::format(", {} thread{} per rank", threads, threads == 1 ? "" : "s");
    }
  }
  for (const std::string& note : p.notes) text += "\nnote     " + note;
  return text;
}

// The data group of a group's ranks on GPUs (parallel/data_group.h): NCCL unless ddp_backend is
// gloo (then collectives are staged through the host over `group`), with a second backend of the
// rank's GPU for the communication stream. `name` tells the communicators of one run apart in
// the store (the same on every member of one).
Result<std::unique_ptr<parallel::DataGroup>> DeviceDataGroup(
    const PreparedTraining& p, parallel::ProcessGroup& group, parallel::CommThread& comm,
    const std::shared_ptr<Backend>& compute, const parallel::DistEnv& ranks,
    const std::string& name) {
  AIR_ASSIGN_OR_RETURN(std::shared_ptr<Backend> transfer,
                       CreateBackend(ForDevice(p.device.device)));
  if (p.config.ddp_backend == "gloo") {
    return parallel::StagedDataGroup(group, comm, *compute, std::move(transfer));
  }
  Result<std::unique_ptr<parallel::DataGroup>> nccl = parallel::NcclDataGroup(
      ranks, *compute, std::move(transfer),
      {.name = name, .timeout = std::chrono::seconds(p.config.ddp_timeout)});
  if (!nccl.ok()) return AtParameter(p.config, "ddp_backend", nccl.status());
  return nccl;
}

Result<TrainSummary> RunTraining(Env* env, PreparedTraining& p, const RunOptions& options) {
  const fsdp::MixedPrecision& precision = p.config.precision;
  const TrainingMemory memory = EstimateTrainingMemory(p);
  const WorkingBytes working{.bytes = memory.activation_bytes + memory.buffer_bytes,
                             .what = "activations and FSDP buffers for " + memory.working};
  const Status fits =
      p.device.gpu != nullptr
          ? CheckModelFitsOnDevice(p.model_config, RunBytes(p), "training", TrainingShare(p),
                                   p.device.memory.free_bytes, p.device.description, working)
          : CheckModelFitsInMemory(env, p.model_config, RunBytes(p), "training", TrainingShare(p),
                                   working);
  AIR_RETURN_IF_ERROR(fits.WithContext(p.config.Where("model_name") + ": " + p.model_dir));
  std::shared_ptr<Backend> backend = p.device.gpu;
  if (backend == nullptr) {
    AIR_ASSIGN_OR_RETURN(
        backend,
        CreateBackend({.kind = "fast", .num_threads = ThreadsPerRank(p, options.num_threads)}));
  }
  // Join the group before loading: a missing peer or a port in use is reported before the
  // (possibly long) weight load. One process is a group of one.
  parallel::GlooOptions gloo;
  gloo.timeout = std::chrono::seconds(p.config.ddp_timeout);
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<parallel::ProcessGroup> group,
                       parallel::CreateGlooProcessGroup(p.dist, gloo));
  // The model is created without storage; FSDP loads one unit at a time and keeps this rank's
  // part, so no rank ever holds the whole fp32 model beyond what its strategy keeps.
  ModelOptions model_options;
  model_options.compute_dtype = precision.param_dtype;
  model_options.buffer_dtype = precision.buffer_dtype;
  model_options.deferred_storage = true;
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<CausalLm> model,
                       CreateModel(p.model_config, backend, model_options));
  ApplyActivationCheckpointing(*model, p.config.activation_checkpointing);
  // LoRA: the base frozen, the adapters added to the units (before FSDP takes them over).
  AIR_ASSIGN_OR_RETURN(LoraSetup adapters, ApplyLora(p, *model));
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<WeightReader> weights, WeightReader::Open(p.model_dir));
  TrainerIo io;
  io.env = env;
  io.progress = options.progress;
  io.progress_is_tty = options.progress_is_tty;
  io.on_logged_step = options.on_logged_step;
  io.model_dir = p.model_dir;
  io.dump_batches_path = options.dump_batches_path;
  io.stop_requested = options.stop_requested;
  if (p.dist.world_size > 1 && !io.dump_batches_path.empty()) {
    io.dump_batches_path += fmt::format(".rank{}", p.dist.rank);
  }
  std::unique_ptr<parallel::ProcessGroup> node_group, replica_group;  // HYBRID_SHARD's
  auto comm = std::make_unique<parallel::CommThread>();
  parallel::ProcessGroup* shard_group = group.get();
  parallel::ProcessGroup* replicas = nullptr;
  parallel::DistEnv shard_dist = p.dist, replica_dist;  // the ranks of each, for NCCL
  fsdp::ShardingStrategy strategy = p.config.sharding_strategy;
  if (strategy == fsdp::ShardingStrategy::kHybridShard && p.dist.world_size == 1) {
    strategy = fsdp::ShardingStrategy::kFullShard;  // one process: nothing to replicate
  }
  if (strategy == fsdp::ShardingStrategy::kHybridShard) {
    // Shards within the node (its local ranks); replicas across the nodes (same local rank).
    parallel::DistEnv in_node = p.dist, across = p.dist;
    in_node.rank = p.dist.local_rank;
    in_node.world_size = p.dist.local_world_size;
    across.rank = p.dist.rank / p.dist.local_world_size;
    across.world_size = p.dist.world_size / p.dist.local_world_size;
    parallel::GlooOptions node_options = gloo, across_options = gloo;
    node_options.sub_group = fmt::format("node{}", across.rank);
    across_options.sub_group = fmt::format("local{}", p.dist.local_rank);
    AIR_ASSIGN_OR_RETURN(node_group, parallel::CreateGlooProcessGroup(in_node, node_options));
    AIR_ASSIGN_OR_RETURN(replica_group, parallel::CreateGlooProcessGroup(across, across_options));
    shard_group = node_group.get();
    replicas = replica_group.get();
    shard_dist = in_node;
    replica_dist = across;
  }
  // Parameters and gradients between ranks on GPUs: NCCL, or gloo staged through the host.
  std::unique_ptr<parallel::DataGroup> shard_data, replica_data;
  if (p.device.gpu != nullptr && p.dist.world_size > 1) {
    // One name per communicator, the same on its members: HYBRID_SHARD's node groups and
    // replica groups are several.
    const std::string shards =
        replicas != nullptr ? fmt::format("node{}", replica_dist.rank) : std::string("world");
    AIR_ASSIGN_OR_RETURN(shard_data,
                         DeviceDataGroup(p, *shard_group, *comm, backend, shard_dist, shards));
    if (replicas != nullptr) {
      AIR_ASSIGN_OR_RETURN(replica_data,
                           DeviceDataGroup(p, *replicas, *comm, backend, replica_dist,
                                           fmt::format("local{}", p.dist.local_rank)));
    }
  }
  // The trained parameters' dtype (torch_dtype); LoRA's adapters stay fp32, as PEFT's.
  const DType state_dtype = adapters.lora == nullptr ? p.config.torch_dtype : DType::kF32;
  fsdp::FsdpOptions fsdp_options{.strategy = strategy,
                                 .precision = precision,
                                 .state_dtype = state_dtype,
                                 .data = shard_data.get(),
                                 .replica_data = replica_data.get()};
  fsdp_options.load_unit = [&](int unit) -> Status {
    AIR_RETURN_IF_ERROR(model->AllocateUnitStorage(unit));
    if (adapters.lora == nullptr) return LoadHfUnit(*weights, *model, unit);
    AIR_RETURN_IF_ERROR(LoadHfUnit(*weights, *model, unit, lora::BaseWeightsOnly()));
    return adapters.LoadUnitAdapters(*model, unit, static_cast<uint64_t>(p.config.seed));
  };
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<fsdp::Fsdp> sharded,
                       fsdp::Fsdp::Apply(*model, *shard_group, *comm, fsdp_options, replicas));
  weights.reset();
  adapters.start.reset();
  io.lora = adapters.lora.get();
  io.parallel = {.group = group.get(),
                 .comm = comm.get(),
                 .fsdp = sharded.get(),
                 .rank = p.dist.rank,
                 .world_size = p.dist.world_size};
  Trainer trainer(model.get(), p.config, io);
  Result<TrainSummary> summary = trainer.Run(*p.loader);
  sharded.reset();  // before the thread and the groups it uses
  replica_data.reset();
  shard_data.reset();
  adapters.lora.reset();  // detaches the adapters before the model goes
  comm.reset();
  replica_group.reset();
  node_group.reset();
  return summary;
}

}  // namespace air::engine::train
