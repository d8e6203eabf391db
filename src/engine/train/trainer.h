// Trainer: the training loop of `air train` on one rank — micro-batches from engine/data's
// DataLoader (packed or padded rows, shuffled by seed, endless epochs), forward and backward
// through a CausalLm sharded by FSDP over the ranks (one process is a group of one: the same
// path), gradient accumulation, global-norm clipping, the learning-rate schedule, AdamW on the
// fp32 master shards, metrics, progress and checkpoints.
//
// Loss normalization (gradient accumulation): an optimizer step takes G micro-batches. Let n_i
// be the loss tokens (labels != -100 after the shift) of micro-batch i and N = sum n_i. Each
// micro-batch's backward is scaled by n_i / N, so the accumulated gradient is exactly the
// gradient of the mean token loss over all N tokens — the same as one batch holding all G
// micro-batches, and what transformers' Trainer computes when it knows num_items_in_batch
// (sum of token losses / N per micro-batch). The step's reported loss is that mean.
//
// Step k (0-based) uses lr = base_lr * schedule(k), as transformers steps its LambdaLR after the
// optimizer. Checkpoints: output_dir/checkpoint-N every save_steps steps, and output_dir itself
// at the end, each a full HF directory (config.json, weights, generation_config.json, tokenizer
// files copied from the base model). Deterministic: the same config and data give the same
// weights (the model's ops are deterministic for a fixed thread count).
// Several ranks: see TrainerParallel.
// Thread safety: drives one model from the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "base/env.h"
#include "base/status.h"
#include "engine/data/data_loader.h"
#include "engine/fsdp/fsdp.h"
#include "engine/lora/lora_model.h"
#include "engine/model/causal_lm.h"
#include "engine/parallel/comm_thread.h"
#include "engine/train/adamw.h"
#include "engine/train/sharded_checkpoint.h"
#include "engine/train/step_metrics.h"
#include "engine/train/train_config.h"

namespace air::engine::train {

// The ranks: the model is sharded by `fsdp` over `group`, whose collectives all run on `comm`
// (all three required; one process passes a group of one). Each rank's DataLoader reads its own
// rows of every global batch; the trainer sums loss tokens and losses over ranks, so every rank
// normalizes by the global count of loss tokens (HF's average_tokens_across_devices) and the
// clipping norm is the global one. Only rank 0 writes metrics, progress and checkpoints.
struct TrainerParallel {
  parallel::ProcessGroup* group = nullptr;
  parallel::CommThread* comm = nullptr;
  fsdp::Fsdp* fsdp = nullptr;
  int rank = 0;
  int world_size = 1;
};

struct TrainerIo {
  Env* env = nullptr;
  std::ostream* progress = nullptr;  // the progress line and notes; nullptr: silent
  bool progress_is_tty = false;
  std::string model_dir;          // the base model's directory (tokenizer files come from it)
  std::string dump_batches_path;  // when set, every micro-batch is appended here as JSONL
  // Called with each metrics.jsonl line as it is written (air train's MLflow logging).
  std::function<void(const StepMetrics&)> on_logged_step;
  TrainerParallel parallel;
  // LoRA applied to the model (engine/lora), or null: checkpoints are then PEFT adapters
  // (adapter_config.json + adapter_model.safetensors, base_model_name_or_path = model_name).
  const lora::Lora* lora = nullptr;
  // Set (by a SIGTERM handler) to ask for a stop: the current step finishes, a resumable
  // checkpoint-N is written, and Run returns kCancelled naming it. Null: never.
  const std::atomic<bool>* stop_requested = nullptr;
};

struct TrainSummary {
  int steps = 0;
  double first_loss = 0.0;
  double last_loss = 0.0;
  int64_t tokens = 0;
  double elapsed_s = 0.0;
  std::string output_dir;
  // Several ranks (this rank's figures, during the training steps): seconds the communication
  // thread spent in collectives, seconds the compute thread waited for them (what overlap did
  // not hide), and the bytes of training state this rank holds.
  double comm_s = 0.0;
  double comm_wait_s = 0.0;
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t gather_bytes = 0;
  int64_t frozen_bytes = 0;  // the frozen base's param_dtype storage (LoRA)
  // The most bytes of this rank's device buffers held at once (Backend::allocation_stats: the
  // model, its training state, activations, FSDP's slots), what the plan's total estimates.
  int64_t peak_memory_bytes = 0;
};

// Optimizer steps an epoch counts for num_train_epochs: with global_batch_size, every step of the
// loader's epoch (ceil(rows / global batch): the count does not change with the number of ranks);
// otherwise transformers' count, floor(its micro-batches per epoch / gradient_accumulation_steps),
// at least 1 (its Trainer, like the loader, ends each epoch with a shorter step, which that count
// leaves out).
int64_t StepsPerEpoch(const TrainConfig& config, const DataLoader& loader);

// Optimizer steps for a run: max_steps when > 0, else ceil(num_train_epochs * steps_per_epoch);
// at most kMaxTotalSteps (a longer run is refused by PrepareTraining).
inline constexpr int kMaxTotalSteps = 2147483647;
int TotalSteps(const TrainConfig& config, int64_t steps_per_epoch);

class Trainer {
 public:
  Trainer(CausalLm* model, TrainConfig config, TrainerIo io)
      : model_(model), config_(std::move(config)), io_(std::move(io)) {}

  Result<TrainSummary> Run(DataLoader& loader);

  // Writes a full checkpoint (fp32 master weights, config, generation config, tokenizer files)
  // into `dir` — with LoRA, the PEFT adapter (the trained parameters only) and the tokenizer
  // files. Collective: every unit is gathered, rank 0 writes.
  Status SaveCheckpoint(const std::string& dir) const;
  // SaveCheckpoint plus the resumable training state of every rank after `step` optimizer
  // steps (engine/train/sharded_checkpoint.h), committed last. Collective.
  Status SaveTrainingCheckpoint(const std::string& dir, int step, const DataLoader& loader,
                                const AdamW& optimizer) const;

 private:
  struct AccumulatedStep {
    double loss_sum = 0.0;    // summed token losses of the step's micro-batches, every rank's
    int64_t loss_tokens = 0;  // N
    int64_t real_tokens = 0;  // non-padding tokens
    double grad_norm = 0.0;   // the global gradient norm (every rank's shard)
  };
  // Zeroes the grads, then runs forward and scaled backward over the next G micro-batches; the
  // loss sums and the squared gradient norm accumulate on the device in `step_scalars` (F64
  // {2}), read back in one copy (the step's one device sync) and combined over the ranks.
  Result<AccumulatedStep> AccumulateGradients(DataLoader& loader, int step,
                                              const std::vector<ParamView>& params,
                                              const View& step_scalars);
  // Sums values[n] over ranks (F64) on the communication thread.
  Status SumOverRanks(double* values, size_t n) const;
  bool lead() const { return io_.parallel.rank == 0; }
  // This rank's part of the training state (trainer_checkpoint.cc).
  StateLayout Layout(const std::vector<ParamView>& params) const;
  // resume_from_checkpoint: loads the checkpoint into the model, optimizer and loader and
  // returns the optimizer steps already done (0 when starting fresh). Collective.
  Result<int> MaybeResume(DataLoader& loader, AdamW& optimizer,
                          const std::vector<ParamView>& params, ProgressDisplay& progress);
  RunIdentity Identity() const;
  // Every rank learns whether any failed (a barrier as well); returns the first local error,
  // or an error naming `what` when another rank failed.
  Status AgreeOnStatus(const Status& local, const std::string& what) const;

  CausalLm* model_;
  TrainConfig config_;
  TrainerIo io_;
};

}  // namespace air::engine::train
