// The training loop (see trainer.h for the loss normalization and checkpoint layout).
#include "engine/train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/time_format.h"
#include "engine/io/checkpoint.h"
#include "engine/io/hf_state_dict.h"
#include "engine/lora/peft_files.h"
#include "engine/train/adamw.h"
#include "engine/train/grad_clip.h"
#include "engine/train/lr_schedule.h"
#include "engine/train/param_view.h"
#include "engine/train/step_metrics.h"

namespace air::engine::train {
namespace {

// splitmix64 of a ^ splitmix64(b): a seed per (run seed, stream).
uint64_t MixSeed(uint64_t a, uint64_t b) {
  auto mix = [](uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  return mix(a ^ mix(b));
}

int64_t CountRealTokens(const TokenBatch& batch) {
  int64_t n = 0;
  for (int32_t s : batch.segment_ids) n += s != 0;
  return n;
}

std::string BatchJson(int step, int micro, const TokenBatch& b) {
  nlohmann::ordered_json j;
  j["step"] = step;
  j["micro"] = micro;
  auto rows = [&](const std::vector<int32_t>& v) {
    nlohmann::json out = nlohmann::json::array();
    for (int r = 0; r < b.batch_size; ++r) {
      out.push_back(
          std::vector<int32_t>(v.begin() + r * b.seq_len, v.begin() + (r + 1) * b.seq_len));
    }
    return out;
  };
  j["input_ids"] = rows(b.input_ids);
  j["labels"] = rows(b.labels);
  j["position_ids"] = rows(b.position_ids);
  j["segment_ids"] = rows(b.segment_ids);
  return j.dump() + "\n";
}

}  // namespace

int64_t StepsPerEpoch(const TrainConfig& config, const DataLoader& loader) {
  if (config.global_batch_size > 0) return loader.steps_per_epoch();
  return std::max<int64_t>(
      1, loader.transformers_batches_per_epoch() / config.gradient_accumulation_steps);
}

int TotalSteps(const TrainConfig& config, int64_t steps_per_epoch) {
  if (config.max_steps > 0) return config.max_steps;
  const double steps = std::ceil(config.num_train_epochs * static_cast<double>(steps_per_epoch));
  // PrepareTraining refuses a run this long; never convert an out-of-range double (UB).
  return steps >= static_cast<double>(kMaxTotalSteps) ? kMaxTotalSteps : static_cast<int>(steps);
}

Status Trainer::SaveCheckpoint(const std::string& dir) const {
  // The fp32 master weights gathered unit by unit; rank 0 holds one host copy of the model (of
  // the adapter with LoRA), the others none, and writes it through the model's state-dict
  // adapter (the one save path).
  const bool adapter_only = io_.lora != nullptr;
  AIR_ASSIGN_OR_RETURN(std::vector<Tensor> full,
                       io_.parallel.fsdp->GatherFullParameters(adapter_only));
  Status written = Status::Ok();
  if (lead()) {
    written =
        adapter_only
            ? lora::SavePeftAdapter(dir, *model_, *io_.lora, full, config_.model_name, io_.env)
            : SaveHfTensors(*model_, full, dir, {.dtype = io_.parallel.fsdp->state_dtype()}, {},
                            io_.env);
    if (written.ok() && !io_.model_dir.empty()) {
      written = CopyTokenizerFiles(io_.model_dir, dir, io_.env).status();
    }
  }
  // Everyone learns whether rank 0 managed: a failed save stops every rank, not just one.
  double failed = written.ok() ? 0.0 : 1.0;
  AIR_RETURN_IF_ERROR(SumOverRanks(&failed, 1));
  AIR_RETURN_IF_ERROR(written);
  if (failed > 0) return Internal(fmt::format("rank 0 could not write the checkpoint {}", dir));
  return Status::Ok();
}

Status Trainer::SumOverRanks(double* values, size_t n) const {
  parallel::ProcessGroup* group = io_.parallel.group;
  return io_.parallel.comm->Run([=] {
    return group->AllReduce(values, n, parallel::CommDType::kF64, parallel::ReduceOp::kSum);
  });
}

Result<Trainer::AccumulatedStep> Trainer::AccumulateGradients(DataLoader& loader, int step,
                                                              const std::vector<ParamView>& params,
                                                              const View& step_scalars) {
  // All micro-batches first: each backward's scale needs the step's total loss-token count.
  std::vector<TokenBatch> micro_batches;
  AccumulatedStep out;
  for (int i = 0; i < config_.gradient_accumulation_steps; ++i) {
    TokenBatch batch = loader.Next();
    out.loss_tokens += batch.CountLossTokens();
    out.real_tokens += CountRealTokens(batch);
    if (!io_.dump_batches_path.empty()) {
      AIR_RETURN_IF_ERROR(
          io_.env->AppendToFile(io_.dump_batches_path, BatchJson(step + 1, i, batch)));
    }
    micro_batches.push_back(std::move(batch));
  }
  fsdp::Fsdp* fsdp = io_.parallel.fsdp;
  // The denominator is the global count: every rank divides by the same N.
  double global_tokens = static_cast<double>(out.loss_tokens);
  AIR_RETURN_IF_ERROR(SumOverRanks(&global_tokens, 1));
  const int64_t total_tokens = static_cast<int64_t>(global_tokens);
  AIR_RETURN_IF_ERROR(fsdp->ZeroGrads());
  const Backend& backend = model_->backend();
  backend.Zero(step_scalars);  // [loss sum, squared gradient norm]
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const TokenBatch& batch = micro_batches[i];
    // Every rank runs every micro-batch (they take part in the same collectives), even one
    // without loss tokens: its scale is then zero.
    fsdp->set_sync_gradients(i + 1 == micro_batches.size());
    // d(mean over all N tokens)/d(param) = sum_i (n_i / N) * d(mean over micro-batch i).
    const int64_t tokens = batch.CountLossTokens();
    const float scale =
        total_tokens > 0
            ? static_cast<float>(static_cast<double>(tokens) / static_cast<double>(total_tokens))
            : 0.0f;
    // The micro-batch's random stream (adapter dropout): from the seed, the global micro-batch
    // and the rank, so a resumed run draws the masks the uninterrupted one would have.
    const uint64_t micro = static_cast<uint64_t>(step) * micro_batches.size() + i;
    const uint64_t rng_seed = MixSeed(static_cast<uint64_t>(config_.seed),
                                      micro * static_cast<uint64_t>(io_.parallel.world_size) +
                                          static_cast<uint64_t>(io_.parallel.rank));
    AIR_ASSIGN_OR_RETURN(
        ForwardResult r,
        model_->Forward(batch, {.loss_scale = scale,
                                .unfused_head = !config_.fused_linear_cross_entropy,
                                .rng_seed = rng_seed,
                                .loss_sum_into = step_scalars.Slice(0, 1)}));
    (void)r;  // the loss went to step_scalars[0]
    AIR_RETURN_IF_ERROR(model_->Backward());
    if (io_.lora != nullptr) AIR_RETURN_IF_ERROR(io_.lora->status());
  }
  AIR_RETURN_IF_ERROR(fsdp->FinishGradients());
  AddSquaredGradNorm(params, backend, step_scalars.Slice(1, 1));
  double local[2] = {0.0, 0.0};  // this rank's loss sum and squared gradient norm
  backend.CopyToHost(local, step_scalars);
  // The step's loss and token counts over every rank.
  double sums[2] = {local[0], static_cast<double>(out.real_tokens)};
  AIR_RETURN_IF_ERROR(SumOverRanks(sums, 2));
  out.loss_sum = sums[0];
  out.real_tokens = static_cast<int64_t>(sums[1]);
  out.loss_tokens = total_tokens;
  // The norm: replicated gradients are already whole; shards' squared norms add up (over the
  // shard group: HYBRID_SHARD's replicas hold the same shard).
  double squared = local[1];
  if (!fsdp->gradients_replicated()) {
    AIR_ASSIGN_OR_RETURN(squared, fsdp->SumOverShards(squared));
  }
  out.grad_norm = std::sqrt(squared);
  return out;
}

Result<TrainSummary> Trainer::Run(DataLoader& loader) {
  Env* env = io_.env;
  const TrainConfig& c = config_;
  const int total_steps = TotalSteps(c, StepsPerEpoch(c, loader));
  const LrSchedule schedule(c.lr_scheduler_type, c.learning_rate, c.WarmupStepsFor(total_steps),
                            total_steps);

  AIR_RETURN_IF_ERROR(env->CreateDirs(c.output_dir));
  if (!io_.dump_batches_path.empty()) {
    AIR_RETURN_IF_ERROR(env->WriteFileAtomic(io_.dump_batches_path, ""));
  }
  std::ostringstream discard;
  ProgressDisplay progress(io_.progress && lead() ? io_.progress : &discard, io_.progress_is_tty,
                           c.logging_steps);

  fsdp::Fsdp* fsdp = io_.parallel.fsdp;
  const std::vector<ParamView> params = fsdp->OptimizerViews();  // this rank's master shards
  const Backend& backend = model_->backend();
  AIR_ASSIGN_OR_RETURN(auto optimizer, AdamW::Create(params,
                                                     AdamWOptions{.beta1 = c.adam_beta1,
                                                                  .beta2 = c.adam_beta2,
                                                                  .epsilon = c.adam_epsilon,
                                                                  .weight_decay = c.weight_decay},
                                                     backend));
  View step_scalars;  // the device scalars a step accumulates: its loss sum, its squared norm
  AIR_ASSIGN_OR_RETURN(auto step_scalars_buffer,
                       backend.AllocateView(DType::kF64, {2}, &step_scalars));
  AIR_ASSIGN_OR_RETURN(const int start_step, MaybeResume(loader, *optimizer, params, progress));
  std::optional<MetricsLog> metrics;  // rank 0's
  if (lead()) {
    AIR_ASSIGN_OR_RETURN(MetricsLog log, start_step > 0
                                             ? MetricsLog::Resume(env, c.output_dir, start_step)
                                             : MetricsLog::Create(env, c.output_dir));
    metrics.emplace(std::move(log));
  }

  TrainSummary summary;
  summary.output_dir = c.output_dir;
  const auto start = std::chrono::steady_clock::now();
  double interval_loss = 0.0;
  int interval_steps = 0;
  int64_t interval_tokens = 0;
  double interval_start_s = 0.0;

  for (int step = start_step; step < total_steps; ++step) {
    const auto step_start = std::chrono::steady_clock::now();
    AIR_ASSIGN_OR_RETURN(AccumulatedStep accumulated,
                         AccumulateGradients(loader, step, params, step_scalars));
    const int64_t loss_tokens = accumulated.loss_tokens;
    const int64_t step_tokens = accumulated.real_tokens;
    const double loss_sum = accumulated.loss_sum;
    if (loss_tokens == 0) {
      progress.Note(
          fmt::format("step {}: no loss tokens in its {} micro-batches (every label is "
                      "-100); the gradients are zero",
                      step + 1, c.gradient_accumulation_steps));
    }
    const double loss = loss_tokens > 0 ? loss_sum / static_cast<double>(loss_tokens) : 0.0;
    if (!std::isfinite(loss)) {
      return Internal(
          fmt::format("step {}: the loss is {} — training diverged; lower "
                      "learning_rate (now {} at {})",
                      step + 1, loss, c.learning_rate, c.Where("learning_rate")));
    }
    // Clipping as torch clips (gradients x min(1, max / (norm + 1e-6))), the factor applied
    // inside the optimizer's pass over the gradients rather than in a pass of its own.
    const double grad_norm = accumulated.grad_norm;
    const double lr = schedule.LearningRate(step);
    optimizer->Step(lr, ClipCoefficient(grad_norm, c.max_grad_norm));
    AIR_RETURN_IF_ERROR(fsdp->AfterOptimizerStep());

    const double elapsed = SecondsSince(start);
    summary.steps = step + 1;
    summary.tokens += step_tokens;
    if (step == start_step) summary.first_loss = loss;
    summary.last_loss = loss;
    interval_loss += loss;
    ++interval_steps;
    interval_tokens += step_tokens;

    StepMetrics m;
    m.step = step + 1;
    m.total_steps = total_steps;
    m.loss = loss;
    m.lr = lr;
    m.grad_norm = grad_norm;
    m.tokens = summary.tokens;
    m.tokens_per_s = step_tokens / std::max(1e-9, SecondsSince(step_start));
    m.elapsed_s = elapsed;
    m.epoch = loader.epoch_progress();
    m.peak_memory_bytes = static_cast<int64_t>(model_->backend().allocation_stats().peak_bytes);
    progress.Update(m);

    const bool last = step + 1 == total_steps;
    if ((step + 1) % c.logging_steps == 0 || last) {
      StepMetrics logged = m;
      logged.loss = interval_loss / interval_steps;
      logged.tokens_per_s = interval_tokens / std::max(1e-9, elapsed - interval_start_s);
      if (metrics) AIR_RETURN_IF_ERROR(metrics->Append(logged));
      if (io_.on_logged_step && lead()) io_.on_logged_step(logged);
      interval_loss = 0.0;
      interval_steps = 0;
      interval_tokens = 0;
      interval_start_s = elapsed;
    }
    if (c.save_steps > 0 && (step + 1) % c.save_steps == 0 && !last) {
      const std::string dir = fmt::format("{}/checkpoint-{}", c.output_dir, step + 1);
      AIR_RETURN_IF_ERROR(SaveTrainingCheckpoint(dir, step + 1, loader, *optimizer));
      progress.Note(fmt::format("saved {}", dir));
    }
    if (io_.stop_requested != nullptr && !last) {
      // Every rank stops at the same step: the request is summed over ranks.
      double stop = io_.stop_requested->load() ? 1.0 : 0.0;
      AIR_RETURN_IF_ERROR(SumOverRanks(&stop, 1));
      if (stop > 0) {
        const std::string dir = fmt::format("{}/checkpoint-{}", c.output_dir, step + 1);
        AIR_RETURN_IF_ERROR(SaveTrainingCheckpoint(dir, step + 1, loader, *optimizer));
        progress.Finish();
        return Cancelled(
            fmt::format("stopped by SIGTERM after step {} of {}; the resumable checkpoint is {} "
                        "(resume_from_checkpoint: latest continues from it)",
                        step + 1, total_steps, dir));
      }
    }
  }
  progress.Finish();
  summary.elapsed_s = SecondsSince(start);
  const fsdp::FsdpMemory held = fsdp->memory();
  summary.comm_s = fsdp->comm_seconds();
  summary.comm_wait_s = fsdp->wait_seconds();
  summary.parameter_bytes = held.parameters;
  summary.frozen_bytes = held.frozen;
  summary.gradient_bytes = held.gradients;
  summary.gather_bytes = held.gather;
  summary.peak_memory_bytes = static_cast<int64_t>(model_->backend().allocation_stats().peak_bytes);
  for (const ParamView& p : params) {
    summary.optimizer_bytes += 2 * static_cast<int64_t>(p.value.bytes());
  }
  if (io_.parallel.world_size > 1 || io_.lora != nullptr) {
    const double mib = 1024.0 * 1024.0;
    const std::string state = fmt::format(
        "{}{:.1f} MiB trained parameters, {:.1f} MiB gradients, {:.1f} MiB optimizer state, "
        "{:.1f} MiB gather slots",
        io_.lora != nullptr
            ? fmt::format("{:.1f} MiB frozen base ({}), ", summary.frozen_bytes / mib,
                          DTypeName(fsdp->precision().param_dtype))
            : "",
        summary.parameter_bytes / mib, summary.gradient_bytes / mib, summary.optimizer_bytes / mib,
        summary.gather_bytes / mib);
    progress.Note(
        io_.parallel.world_size > 1
            ? fmt::format("rank 0 of {}: {:.2f} s in collectives, {:.2f} s of it waited for by "
                          "compute ({:.0f}% hidden by overlap); holds {}",
                          io_.parallel.world_size, summary.comm_s, summary.comm_wait_s,
                          summary.comm_s > 0
                              ? 100.0 * (1.0 - std::min(1.0, summary.comm_wait_s / summary.comm_s))
                              : 0.0,
                          state)
            : fmt::format("holds {}", state));
  }
  AIR_RETURN_IF_ERROR(SaveCheckpoint(c.output_dir));
  if (c.save_steps > 0 && total_steps % c.save_steps == 0) {
    // The last periodic checkpoint coincides with the final one; keep the layout predictable.
    AIR_RETURN_IF_ERROR(
        SaveTrainingCheckpoint(fmt::format("{}/checkpoint-{}", c.output_dir, total_steps),
                               total_steps, loader, *optimizer));
  }
  return summary;
}

}  // namespace air::engine::train
