// The training loop (see trainer.h for the loss normalization and checkpoint layout).
#include "engine/train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/io/checkpoint.h"
#include "engine/io/hf_state_dict.h"
#include "engine/train/adamw.h"
#include "engine/train/grad_clip.h"
#include "engine/train/lr_schedule.h"
#include "engine/train/param_view.h"
#include "engine/train/step_metrics.h"

namespace air::engine::train {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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

int TotalSteps(const TrainConfig& config, int64_t batches_per_epoch) {
  if (config.max_steps > 0) return config.max_steps;
  const int64_t per_epoch =
      std::max<int64_t>(1, batches_per_epoch / config.gradient_accumulation_steps);
  const double steps = std::ceil(config.num_train_epochs * static_cast<double>(per_epoch));
  // PrepareTraining refuses a run this long; never convert an out-of-range double (UB).
  return steps >= static_cast<double>(kMaxTotalSteps) ? kMaxTotalSteps : static_cast<int>(steps);
}

Status Trainer::SaveCheckpoint(const std::string& dir) const {
  AIR_RETURN_IF_ERROR(SaveHfModel(*model_, dir));
  if (!io_.model_dir.empty()) {
    AIR_RETURN_IF_ERROR(CopyTokenizerFiles(io_.model_dir, dir).status());
  }
  return Status::Ok();
}

Result<Trainer::AccumulatedStep> Trainer::AccumulateGradients(DataLoader& loader, int step) {
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
  AIR_RETURN_IF_ERROR(model_->ZeroGrads());
  for (const TokenBatch& batch : micro_batches) {
    if (batch.CountLossTokens() == 0) continue;  // contributes nothing to the mean
    AIR_ASSIGN_OR_RETURN(ForwardResult r, model_->Forward(batch));
    out.loss_sum += r.loss_sum;
    // d(mean over all N tokens)/d(param) = sum_i (n_i / N) * d(mean over micro-batch i).
    const float scale = static_cast<float>(static_cast<double>(r.loss_tokens) /
                                           static_cast<double>(out.loss_tokens));
    AIR_RETURN_IF_ERROR(model_->Backward(scale));
  }
  return out;
}

Result<TrainSummary> Trainer::Run(DataLoader& loader) {
  Env* env = io_.env;
  const TrainConfig& c = config_;
  const int total_steps = TotalSteps(c, loader.batches_per_epoch());
  const LrSchedule schedule(c.lr_scheduler_type, c.learning_rate, c.WarmupStepsFor(total_steps),
                            total_steps);

  AIR_RETURN_IF_ERROR(env->CreateDirs(c.output_dir));
  AIR_ASSIGN_OR_RETURN(MetricsLog metrics, MetricsLog::Create(env, c.output_dir));
  if (!io_.dump_batches_path.empty()) {
    AIR_RETURN_IF_ERROR(env->WriteFileAtomic(io_.dump_batches_path, ""));
  }
  std::ostringstream discard;
  ProgressDisplay progress(io_.progress ? io_.progress : &discard, io_.progress_is_tty);

  model_->set_activation_checkpointing(c.activation_checkpointing);
  AIR_RETURN_IF_ERROR(model_->ZeroGrads());  // allocates the grads the views point into
  std::vector<ParamView> params = ViewsOf(model_->parameters());
  const Backend& backend = model_->backend();
  AIR_ASSIGN_OR_RETURN(auto optimizer, AdamW::Create(params,
                                                     AdamWOptions{.beta1 = c.adam_beta1,
                                                                  .beta2 = c.adam_beta2,
                                                                  .epsilon = c.adam_epsilon,
                                                                  .weight_decay = c.weight_decay},
                                                     backend));
  View norm_slot;  // the device scalar the gradient norm accumulates in
  AIR_ASSIGN_OR_RETURN(auto norm_slot_buffer, backend.AllocateView(DType::kF64, {1}, &norm_slot));

  TrainSummary summary;
  summary.output_dir = c.output_dir;
  const auto start = std::chrono::steady_clock::now();
  double interval_loss = 0.0;
  int interval_steps = 0;
  int64_t interval_tokens = 0;
  double interval_start_s = 0.0;

  for (int step = 0; step < total_steps; ++step) {
    const auto step_start = std::chrono::steady_clock::now();
    AIR_ASSIGN_OR_RETURN(AccumulatedStep accumulated, AccumulateGradients(loader, step));
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
    const double grad_norm = ClipGradNorm(params, c.max_grad_norm, backend, norm_slot);
    const double lr = schedule.LearningRate(step);
    optimizer->Step(lr);

    const double elapsed = SecondsSince(start);
    summary.steps = step + 1;
    summary.tokens += step_tokens;
    if (step == 0) summary.first_loss = loss;
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
    progress.Update(m);

    const bool last = step + 1 == total_steps;
    if ((step + 1) % c.logging_steps == 0 || last) {
      StepMetrics logged = m;
      logged.loss = interval_loss / interval_steps;
      logged.tokens_per_s = interval_tokens / std::max(1e-9, elapsed - interval_start_s);
      AIR_RETURN_IF_ERROR(metrics.Append(logged));
      if (io_.on_logged_step) io_.on_logged_step(logged);
      interval_loss = 0.0;
      interval_steps = 0;
      interval_tokens = 0;
      interval_start_s = elapsed;
    }
    if (c.save_steps > 0 && (step + 1) % c.save_steps == 0 && !last) {
      const std::string dir = fmt::format("{}/checkpoint-{}", c.output_dir, step + 1);
      AIR_RETURN_IF_ERROR(SaveCheckpoint(dir));
      progress.Note(fmt::format("saved {}", dir));
    }
  }
  progress.Finish();
  summary.elapsed_s = SecondsSince(start);
  AIR_RETURN_IF_ERROR(SaveCheckpoint(c.output_dir));
  if (c.save_steps > 0 && total_steps % c.save_steps == 0) {
    // The last periodic checkpoint coincides with the final one; keep the layout predictable.
    AIR_RETURN_IF_ERROR(SaveCheckpoint(fmt::format("{}/checkpoint-{}", c.output_dir, total_steps)));
  }
  return summary;
}

}  // namespace air::engine::train
