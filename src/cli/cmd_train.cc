// `air train [--config FILE] [--set KEY=VALUE]... [--dry-run] [--threads N] [--device D]`:
// fine-tunes a Hugging Face Llama-family model with air's native engine. Parameters come from
// --config, else from the file named by HYPERPARAMETERS_PATH (what `air run` gives a workload's
// command); all are validated, and the model and dataset resolved, before any weights load.
// --dry-run stops there and prints the plan. Progress goes to stdout (stderr with -o json, whose
// envelope holds the summary); metrics.jsonl and the checkpoint go to output_dir.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <optional>

#include "base/strings.h"
#include "cli/commands.h"
#include "engine/train/mfu.h"
#include "engine/train/train_run.h"
#include "tracking/metric_logger.h"

namespace air::cli {
namespace {

// SIGTERM asks the trainer to finish its step, write a resumable checkpoint and exit non-zero
// (what torchrun, air launch, air cancel and Slurm's preemption send). A signal handler can only
// reach process-wide state: this one flag, set from the handler, read by the training loop.
std::atomic<bool> g_stop_requested{false};

void RequestStop(int) { g_stop_requested.store(true); }

void CatchSigterm() {
  struct sigaction action {};
  action.sa_handler = RequestStop;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
}

// MLflow logging when MLFLOW_TRACKING_URI and MLFLOW_RUN_ID are set (air run sets both), from
// rank 0 only: parameters now, then each logged step's loss, learning rate, gradient norm and
// tokens/s (tracking/metric_logger.h).
// FLOPs per token / the GPU's peak, so that MFU = tokens/s x this; nullopt where either is
// unknown (the CPU, fp32, a mixture of experts, a GPU missing from engine/train/mfu.h's table).
struct MfuBasis {
  double flops_per_token = 0;
  double peak_flops = 0;
};
std::optional<MfuBasis> MfuBasisOf(const engine::train::PreparedTraining& p) {
  if (!p.device.gpu) return std::nullopt;
  auto peak = engine::train::PeakDenseFlops(p.device.description, p.config.precision.param_dtype);
  auto flops = engine::train::TrainingFlopsPerToken(p.model_config, p.config.max_seq_len,
                                                    p.config.lora.enabled);
  if (!peak || !flops) return std::nullopt;
  return MfuBasis{*flops, *peak};
}

std::unique_ptr<tracking::MetricLogger> StartTracking(CliContext& ctx,
                                                      const engine::train::PreparedTraining& p) {
  auto uri = ctx.env->GetEnv("MLFLOW_TRACKING_URI");
  auto run_id = ctx.env->GetEnv("MLFLOW_RUN_ID");
  if (!uri || uri->empty() || !run_id || run_id->empty()) return nullptr;
  if (p.dist.rank != 0) return nullptr;
  if (uri->rfind("http://", 0) != 0 && uri->rfind("https://", 0) != 0) return nullptr;
  // The mlflow client's credential variables (air run injects them as secrets for an external
  // server that needs them).
  tracking::Credentials credentials;
  credentials.token = ctx.env->GetEnv("MLFLOW_TRACKING_TOKEN").value_or("");
  credentials.username = ctx.env->GetEnv("MLFLOW_TRACKING_USERNAME").value_or("");
  credentials.password = ctx.env->GetEnv("MLFLOW_TRACKING_PASSWORD").value_or("");
  auto logger = std::make_unique<tracking::MetricLogger>(*uri, credentials, *run_id);
  const auto& c = p.config;
  std::vector<tracking::KeyValue> params = {
      {"model_name", c.model_name},
      {"dataset_name", c.dataset_name},
      {"learning_rate", fmt::format("{}", c.learning_rate)},
      {"max_seq_len", std::to_string(c.max_seq_len)},
      {"per_device_batch_size", std::to_string(c.per_device_batch_size)},
      {"gradient_accumulation_steps", std::to_string(c.gradient_accumulation_steps)},
      {"global_batch_size", std::to_string(GlobalBatchSize(p))},
      {"total_steps", std::to_string(p.total_steps)},
      {"warmup_steps", std::to_string(p.warmup_steps)},
      {"weight_decay", fmt::format("{}", c.weight_decay)},
      {"max_grad_norm", fmt::format("{}", c.max_grad_norm)},
      {"seed", std::to_string(c.seed)}};
  if (c.lora.enabled) {  // the settings in effect (a starting adapter's own)
    params.push_back({"use_peft", "true"});
    params.push_back({"lora_r", std::to_string(c.lora.r)});
    params.push_back({"lora_alpha", fmt::format("{}", c.lora.alpha)});
    params.push_back({"lora_dropout", fmt::format("{}", c.lora.dropout)});
    params.push_back({"use_rslora", c.lora.use_rslora ? "true" : "false"});
  }
  if (auto mfu = MfuBasisOf(p)) {  // what the logged `mfu` is computed from
    params.push_back({"model_flops_per_token", fmt::format("{:.6g}", mfu->flops_per_token)});
    params.push_back({"device_peak_tflops", fmt::format("{:.6g}", mfu->peak_flops / 1e12)});
  }
  logger->LogParams(std::move(params));
  return logger;
}

struct TrainFlags {
  std::string config_path;
  std::vector<std::string> overrides;
  bool dry_run = false;
  int threads = 0;
  std::string device;  // --device: the `device` parameter, over the file's
  std::string dump_batches;
};

void RunTrainCommand(CliContext& ctx, const TrainFlags& flags) {
  using namespace air::engine::train;
  std::vector<std::string> overrides = flags.overrides;
  if (!flags.device.empty()) overrides.push_back("device=" + flags.device);
  auto config = LoadTrainConfig(ctx.env, flags.config_path, overrides);
  if (!config.ok()) return EmitError(ctx, config.status());
  auto prepared = PrepareTraining(ctx.env, std::move(*config));
  if (!prepared.ok()) return EmitError(ctx, prepared.status());

  std::ostream* progress = ctx.json() ? ctx.err : ctx.out;
  const bool tty = isatty(ctx.json() ? STDERR_FILENO : STDOUT_FILENO) == 1;
  const std::string plan = DescribePlan(*prepared, flags.threads);
  nlohmann::json data = {
      {"model_dir", prepared->model_dir},          {"dataset", prepared->config.dataset_name},
      {"dataset_kind", prepared->dataset_kind},    {"examples", prepared->num_examples},
      {"total_steps", prepared->total_steps},      {"warmup_steps", prepared->warmup_steps},
      {"output_dir", prepared->config.output_dir}, {"notes", prepared->notes}};
  data["gradient_accumulation_steps"] = prepared->config.gradient_accumulation_steps;
  data["global_batch_size"] = GlobalBatchSize(*prepared);
  if (prepared->config.lora.enabled) data["lora"] = prepared->lora_description;
  const engine::fsdp::MixedPrecision& mp = prepared->config.precision;
  data["precision"] = {{"param_dtype", engine::fsdp::TorchDTypeName(mp.param_dtype)},
                       {"reduce_dtype", engine::fsdp::TorchDTypeName(mp.reduce_dtype)},
                       {"buffer_dtype", engine::fsdp::TorchDTypeName(mp.buffer_dtype)}};
  const TrainingMemory memory = EstimateTrainingMemory(*prepared);
  data["memory"] = {{"parameters", memory.parameters},
                    {"bytes_per_rank", memory.bytes_per_rank},
                    {"what", memory.what},
                    {"activation_bytes", memory.activation_bytes},
                    {"buffer_bytes", memory.buffer_bytes},
                    {"total_bytes_per_rank", memory.total_bytes_per_rank()}};
  if (flags.dry_run) {
    data["dry_run"] = true;
    return EmitData(ctx, data, plan + "\ndry run: parameters valid, nothing trained");
  }
  // Several ranks: rank 0 speaks for the group; the others print only their errors.
  const bool lead = prepared->dist.rank == 0;
  if (lead) *progress << plan << std::endl;

  RunOptions options;
  options.progress = lead ? progress : nullptr;
  options.progress_is_tty = tty;
  options.dump_batches_path = flags.dump_batches;
  CatchSigterm();
  options.stop_requested = &g_stop_requested;
  options.num_threads = flags.threads;
  std::unique_ptr<tracking::MetricLogger> tracking = StartTracking(ctx, *prepared);
  if (tracking) {
    options.on_logged_step = [&tracking, &ctx, mfu = MfuBasisOf(*prepared)](const StepMetrics& m) {
      int64_t now_ms = ctx.env->NowMicros() / 1000;
      std::vector<tracking::Metric> points = {{"loss", m.loss, now_ms, m.step},
                                              {"learning_rate", m.lr, now_ms, m.step},
                                              {"grad_norm", m.grad_norm, now_ms, m.step},
                                              {"tokens_per_s", m.tokens_per_s, now_ms, m.step}};
      if (mfu) {
        points.push_back(
            {"mfu", m.tokens_per_s * mfu->flops_per_token / mfu->peak_flops, now_ms, m.step});
      }
      tracking->Log(std::move(points));
    };
  }
  auto summary = RunTraining(ctx.env, *prepared, options);
  if (tracking) {
    tracking::MetricLoggerReport report = tracking->Finish();
    data["tracking"] = {
        {"sent", report.sent}, {"dropped", report.dropped}, {"unsent", report.unsent}};
    if (report.dropped + report.unsent > 0) {
      *progress << fmt::format(
                       "tracking: {} metric points sent, {} not sent ({} dropped by the "
                       "full queue){}",
                       report.sent, report.dropped + report.unsent, report.dropped,
                       report.last_error.empty() ? "" : ": " + report.last_error)
                << std::endl;
    }
  }
  if (!summary.ok()) return EmitError(ctx, summary.status());
  data["steps"] = summary->steps;
  data["first_loss"] = summary->first_loss;
  data["last_loss"] = summary->last_loss;
  data["tokens"] = summary->tokens;
  data["elapsed_s"] = summary->elapsed_s;
  data["metrics"] = prepared->config.output_dir + "/metrics.jsonl";
  // This rank's training state (rank 0's under several ranks).
  data["memory"] = {{"frozen_bytes", summary->frozen_bytes},
                    {"parameter_bytes", summary->parameter_bytes},
                    {"gradient_bytes", summary->gradient_bytes},
                    {"optimizer_bytes", summary->optimizer_bytes},
                    {"gather_bytes", summary->gather_bytes},
                    {"peak_bytes", summary->peak_memory_bytes},
                    {"planned_bytes", memory.total_bytes_per_rank()}};
  if (prepared->dist.world_size > 1) {
    data["parallel"] = {
        {"rank", prepared->dist.rank},
        {"world_size", prepared->dist.world_size},
        {"strategy", engine::fsdp::ShardingStrategyName(prepared->config.sharding_strategy)},
        {"comm_s", summary->comm_s},
        {"comm_wait_s", summary->comm_wait_s},
        {"parameter_bytes", summary->parameter_bytes},
        {"gradient_bytes", summary->gradient_bytes},
        {"optimizer_bytes", summary->optimizer_bytes},
        {"gather_bytes", summary->gather_bytes}};
  }
  EmitData(ctx, data,
           fmt::format("trained {} steps in {:.1f} s: loss {:.4f} -> {:.4f}; peak memory {} (the "
                       "plan: {}); checkpoint in {}",
                       summary->steps, summary->elapsed_s, summary->first_loss, summary->last_loss,
                       HumanBytes(static_cast<uint64_t>(summary->peak_memory_bytes)),
                       HumanBytes(static_cast<uint64_t>(memory.total_bytes_per_rank())),
                       summary->output_dir));
}

}  // namespace

void RegisterTrainCommand(CLI::App& root, CliContext& ctx) {
  auto* cmd = root.add_subcommand("train", "fine-tune a Hugging Face Llama-family model");
  auto flags = std::make_shared<TrainFlags>();
  cmd->add_option("-c,--config", flags->config_path,
                  "YAML parameters (default: the file named by HYPERPARAMETERS_PATH)");
  cmd->add_option("--set", flags->overrides, "override one parameter: KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--dry-run", flags->dry_run,
                "validate the parameters, resolve the model and data, print the plan, stop");
  cmd->add_option("--threads", flags->threads,
                  "compute threads (default: AIR_NUM_THREADS, else every core)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--device", flags->device,
                  "where to train: cpu (default), cuda (the GPU of LOCAL_RANK), cuda:N, auto; "
                  "the same as --set device=...");
  cmd->add_option("--dump-batches", flags->dump_batches,
                  "append every micro-batch used to this JSONL file (for parity checks)");
  cmd->callback([&ctx, flags] { RunTrainCommand(ctx, *flags); });
}

}  // namespace air::cli
