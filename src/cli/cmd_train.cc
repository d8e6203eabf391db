// `air train [--config FILE] [--set KEY=VALUE]... [--dry-run] [--threads N]`: fine-tunes a Hugging
// Face Llama-family model with air's native engine. Parameters come from --config, else from
// the file named by HYPERPARAMETERS_PATH (what `air run` gives a workload's command); all are
// validated, and the model and dataset resolved, before any weights load. --dry-run stops there
// and prints the plan. Progress goes to stdout (stderr with -o json, whose envelope holds the
// summary); metrics.jsonl and the checkpoint go to output_dir.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "engine/train/train_run.h"

namespace air::cli {
namespace {

struct TrainFlags {
  std::string config_path;
  std::vector<std::string> overrides;
  bool dry_run = false;
  int threads = 0;
  std::string dump_batches;
};

void RunTrainCommand(CliContext& ctx, const TrainFlags& flags) {
  using namespace air::engine::train;
  auto config = LoadTrainConfig(ctx.env, flags.config_path, flags.overrides);
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
  if (flags.dry_run) {
    data["dry_run"] = true;
    return EmitData(ctx, data, plan + "\ndry run: parameters valid, nothing trained");
  }
  *progress << plan << std::endl;

  RunOptions options;
  options.progress = progress;
  options.progress_is_tty = tty;
  options.dump_batches_path = flags.dump_batches;
  options.num_threads = flags.threads;
  auto summary = RunTraining(ctx.env, *prepared, options);
  if (!summary.ok()) return EmitError(ctx, summary.status());
  data["steps"] = summary->steps;
  data["first_loss"] = summary->first_loss;
  data["last_loss"] = summary->last_loss;
  data["tokens"] = summary->tokens;
  data["elapsed_s"] = summary->elapsed_s;
  data["metrics"] = prepared->config.output_dir + "/metrics.jsonl";
  EmitData(ctx, data,
           fmt::format("trained {} steps in {:.1f} s: loss {:.4f} -> {:.4f}; checkpoint in {}",
                       summary->steps, summary->elapsed_s, summary->first_loss, summary->last_loss,
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
  cmd->add_option("--dump-batches", flags->dump_batches,
                  "append every micro-batch used to this JSONL file (for parity checks)");
  cmd->callback([&ctx, flags] { RunTrainCommand(ctx, *flags); });
}

}  // namespace air::cli
