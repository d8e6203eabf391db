// The stages of `air train`, each callable alone: load and validate the parameters, resolve the
// model and the dataset (all before any weights are read), then load the model and train.
//
//   LoadTrainConfig   --config FILE, else $HYPERPARAMETERS_PATH, plus --set overrides
//   PrepareTraining   model_name -> directory (HF cache aware), config.json, the dataset ->
//                     examples -> a DataLoader (packing or length-grouped padded batches,
//                     shuffled by seed); every error names the parameter and where it was given
//   RunTraining       loads the weights, trains (Trainer), writes the checkpoint(s)
// Thread safety: run from one thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "engine/data/data_loader.h"
#include "engine/model/model_config.h"
#include "engine/parallel/dist_env.h"
#include "engine/train/train_config.h"
#include "engine/train/train_device.h"
#include "engine/train/trainer.h"

namespace air::engine::train {

// Reads the YAML from `config_path`, or when empty from the file named by HYPERPARAMETERS_PATH;
// with neither, the --set overrides alone must supply the required keys.
Result<TrainConfig> LoadTrainConfig(Env* env, const std::string& config_path,
                                    const std::vector<std::string>& overrides);

struct PreparedTraining {
  TrainConfig config;
  std::string model_dir;
  ModelConfig model_config;
  std::unique_ptr<DataLoader> loader;
  std::string dataset_kind;  // "pre-tokenized JSONL", "alpaca", "chat", ...
  int64_t num_examples = 0;
  int total_steps = 0;
  int warmup_steps = 0;
  std::vector<std::string> notes;  // what the user should know (bf16 on the CPU, ...)
  parallel::DistEnv dist;          // this process's rank (world size 1 without a launcher)
  TrainingDevice device;           // where this rank computes (train_device.h)
  // LoRA (use_peft; train_lora.h): config.lora holds the settings in effect (the starting
  // adapter's when lora_adapter_path is given).
  std::string lora_adapter_dir;          // the starting adapter, resolved; empty: none
  std::string lora_description;          // the plan's "lora" line
  double lora_trainable_fraction = 0.0;  // trained parameters / the base model's
  // With LoRA: the units' trainable (adapters) and frozen elements, and the adapters' scratch
  // for a micro-batch (from the planned adapters), for the memory plan.
  std::vector<fsdp::UnitSize> lora_units;
  double lora_scratch_bytes = 0.0;
};

Result<PreparedTraining> PrepareTraining(Env* env, TrainConfig config);

struct RunOptions {
  std::ostream* progress = nullptr;
  bool progress_is_tty = false;
  std::string dump_batches_path;
  int num_threads = 0;  // 0: AIR_NUM_THREADS or the number of cores
  std::function<void(const StepMetrics&)> on_logged_step;  // see TrainerIo
  const std::atomic<bool>* stop_requested = nullptr;       // see TrainerIo
};

// A few lines describing the run (model, data, steps, schedule, compute), for the start of the
// output. num_threads as in RunOptions.
// The training state one rank holds, as the memory check before loading counts it: the
// parameters times the bytes per parameter (fp32 master, gradients, AdamW moments, sharded by the
// strategy; a whole param_dtype copy where one stays resident). Activations come on top.
struct TrainingMemory {
  double parameters = 0;
  double bytes_per_rank = 0;  // the parameters' training state
  std::string what;           // what those bytes are, and how they are sharded
  // A micro-batch's workspace (activations, the head's chunk of logits, gradient scratch),
  // measured from the model's own layout for per_device_batch_size x max_seq_len.
  double activation_bytes = 0;
  double buffer_bytes = 0;  // FSDP's gather/reduce slots
  std::string working;      // "a micro-batch of 4 x 1024, activation checkpointing"
  double total_bytes_per_rank() const { return bytes_per_rank + activation_bytes + buffer_bytes; }
};
TrainingMemory EstimateTrainingMemory(const PreparedTraining& prepared);

// Sequences per optimizer step over every rank: per_device_batch_size x ranks x
// gradient_accumulation_steps (global_batch_size when it was given).
int64_t GlobalBatchSize(const PreparedTraining& prepared);

std::string DescribePlan(const PreparedTraining& prepared, int num_threads = 0);

Result<TrainSummary> RunTraining(Env* env, PreparedTraining& prepared, const RunOptions& options);

}  // namespace air::engine::train
