// TrainConfig: the parameters of `air train`, read from YAML (a --config file, or the file named
// by HYPERPARAMETERS_PATH as air's runtime and the seed system write it) plus `--set key=value`
// overrides, with the seed scripts' names (model_name, dataset_name, max_seq_len, ...).
//
// Everything is validated in one pass before any model is loaded: unknown keys (with a
// did-you-mean), duplicate keys, wrong types, out-of-range values and conflicting pairs are each
// reported as `FILE:LINE:COL: field: message` (or `--set key=value: field: message`), all at
// once, in a kInvalidArgument Status. The defaults are listed beside each field and in
// docs/engine-training.md. Plain value type; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/fsdp/mixed_precision.h"
#include "engine/fsdp/sharding_strategy.h"
#include "engine/lora/lora_config.h"

namespace air::engine::train {

enum class LrSchedulerType { kConstant, kConstantWithWarmup, kLinear, kCosine };

// "constant", "constant_with_warmup", "linear", "cosine".
const char* LrSchedulerTypeName(LrSchedulerType type);

struct TrainConfig {
  // --- required ---
  std::string model_name;    // a local HF model directory or a hub id in the HF cache
  std::string dataset_name;  // a JSON/JSONL file or directory (alpaca, chat or pre-tokenized)
  std::string output_dir;    // where the checkpoint, metrics.jsonl and checkpoint-N go

  // --- data ---
  int max_seq_len = 1024;         // alias max_length; sequences are truncated to this
  int per_device_batch_size = 4;  // sequences per micro-batch
  bool packing = false;           // pack several examples per row (no cross-attention)
  // Chat and alpaca records: learn every token (TRL's SFTConfig with assistant_only_loss false,
  // the seeds' setting) instead of only the answer / the assistant's messages.
  bool train_on_prompt = false;

  // --- optimization ---
  int gradient_accumulation_steps = 1;
  // Sequences per optimizer step over every rank (torchtitan's global_batch_size); 0 (unset):
  // per_device_batch_size x ranks x gradient_accumulation_steps. Given, the accumulation is
  // derived from the ranks (global_batch_size / (per_device_batch_size x ranks)), so a run
  // resumed on another number of ranks keeps its global batch, its steps and their rows; it
  // excludes gradient_accumulation_steps, and must be a multiple of per_device_batch_size x ranks.
  int global_batch_size = 0;
  double learning_rate = 2e-5;
  int max_steps = -1;             // optimizer steps; -1: num_train_epochs decides
  double num_train_epochs = 1.0;  // used when max_steps is -1; may be fractional
  double warmup_ratio = 0.0;      // fraction of the total steps (rounded up)
  int warmup_steps = 0;           // exclusive with warmup_ratio
  LrSchedulerType lr_scheduler_type = LrSchedulerType::kLinear;
  double weight_decay = 0.0;   // applied to tensors of 2+ dims only (not norms, biases)
  double max_grad_norm = 1.0;  // global-norm clipping; 0 disables it
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  int64_t seed = 42;

  // --- outputs ---
  int logging_steps = 10;  // a metrics.jsonl line every N optimizer steps
  int save_steps = 0;      // output_dir/checkpoint-N every N steps; 0: only at the end
  // "" (start fresh), "latest" (the newest complete output_dir/checkpoint-N, or fresh when there
  // is none; YAML true means the same), or a checkpoint directory.
  std::string resume_from_checkpoint;

  // --- compute ---
  // The dtype the parameters are loaded and kept in, as from_pretrained's torch_dtype (alias
  // dtype): float32 (the default: fp32 master weights, gradients and AdamW moments, 16 bytes a
  // parameter, computing in mixed_precision's param_dtype), or bfloat16 (the seed's recipe:
  // parameters, gradients and moments in bf16, 8 bytes a parameter, each AdamW update in fp32
  // rounded once; it computes in bf16, so it implies bf16: true). LoRA adapters stay fp32 (PEFT's
  // default); torch_dtype applies to what full fine-tuning trains.
  DType torch_dtype = DType::kF32;
  // Where each rank computes: "cpu", "cuda" (the GPU of the rank's LOCAL_RANK), "cuda:N" or
  // "auto" (cuda when a GPU is usable, else cpu): engine/train/train_device.h.
  std::string device = "cpu";
  // HF's bf16: true = mixed_precision {param_dtype, reduce_dtype, buffer_dtype} all bfloat16
  // (what Accelerate sets under FSDP); given together, the two must agree.
  bool bf16 = false;
  // FSDP1's MixedPrecision (fsdp/mixed_precision.h): `mixed_precision: {param_dtype: bfloat16,
  // reduce_dtype: ..., buffer_dtype: ...}` (reduce_dtype defaults to param_dtype, buffer_dtype to
  // float32, as FSDP1's do), or the string bf16 / no.
  fsdp::MixedPrecision precision;
  bool activation_checkpointing = false;  // recompute each layer's activations in backward
  // The head and loss fused and chunked (model/lm_head.h, Liger's FusedLinearCrossEntropy):
  // never the N x V logits. false computes them whole (to measure what fusing saves).
  bool fused_linear_cross_entropy = true;

  // --- LoRA (engine/lora): TRL's keys, PEFT's LoraConfig ---
  // use_peft, lora_r (16), lora_alpha (32), lora_dropout (0.05), lora_target_modules (a list, a
  // regex, or all-linear; unset: q_proj and v_proj, PEFT's default), use_rslora,
  // lora_modules_to_save, lora_adapter_path (start from this PEFT adapter).
  lora::LoraConfig lora;

  // --- several ranks (engine/fsdp) ---
  // fsdp_sharding_strategy (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD/DDP, HYBRID_SHARD), or HF's
  // `fsdp` string ("full_shard auto_wrap"; "" = DDP). Used when WORLD_SIZE > 1.
  fsdp::ShardingStrategy sharding_strategy = fsdp::ShardingStrategy::kFullShard;
  // How ranks exchange parameters and gradients (HF's ddp_backend): "" (the default: nccl on
  // GPUs, gloo on the CPU), "nccl" (GPUs), or "gloo" (the CPU; on GPUs, staged through page-locked
  // host memory: several ranks may then share one GPU). Scalars always go over gloo.
  std::string ddp_backend;
  // Seconds a collective may take before the rank gives up naming the peer it waited for (HF's
  // ddp_timeout; air's default is 300 s rather than HF's 1800 so a lost peer ends a run sooner).
  int ddp_timeout = 300;

  // Where each key that was given came from ("file.yaml:3:5" or "--set key=value"), by canonical
  // name; later errors (a missing dataset file, say) name it.
  std::map<std::string, std::string> sources;

  // The number of warmup steps for a run of `total_steps` optimizer steps: warmup_steps if set,
  // else ceil(total_steps * warmup_ratio) (transformers' rule).
  int WarmupStepsFor(int total_steps) const;

  // "FILE:LINE:COL: field" for a given key, or "field" when it was defaulted.
  std::string Where(const std::string& field) const;
};

// Every key accepted, canonical names and aliases, for help texts and did-you-mean.
const std::vector<std::string>& TrainConfigKeys();

// Parses and validates YAML text. `source_name` is the file name used in error messages.
// `overrides` are "key=value" strings applied over the file's values (the value is read as a YAML
// scalar, so `--set bf16=true` is a bool and `--set learning_rate=1e-4` a number).
Result<TrainConfig> ParseTrainConfig(const std::string& yaml_text, const std::string& source_name,
                                     const std::vector<std::string>& overrides = {});

}  // namespace air::engine::train
