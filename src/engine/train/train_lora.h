// LoRA's part of `air train`'s stages (train_run.h), applied to the model from outside like FSDP
// and activation checkpointing (engine/lora):
//
//   PrepareLora  (PrepareTraining, before any weight is read) resolves lora_adapter_path (a
//                directory or a hub id in the HF cache), takes the adapter's adapter_config.json
//                as the LoRA settings (a key given too must agree with it), plans the targets on
//                a model without storage and checks the adapter's tensors against it, and
//                describes the plan. Every error names the key and where it was given.
//   ApplyLora    (RunTraining, after the model is created with deferred storage, before FSDP)
//                converts the model and returns what the unit-at-a-time load needs: the base
//                weights without the adapters (lora::BaseWeightsOnly), then each unit's adapters
//                initialized as PEFT does or read from the starting adapter (LoadUnitAdapters).
// Thread safety: run from the thread that drives the model.
#pragma once

#include <memory>
#include <string>

#include "base/env.h"
#include "base/status.h"
#include "engine/io/hf_state_dict.h"
#include "engine/lora/lora_model.h"
#include "engine/lora/peft_files.h"
#include "engine/model/causal_lm.h"

namespace air::engine::train {

struct PreparedTraining;

Status PrepareLora(Env* env, PreparedTraining& p);

struct LoraSetup {
  std::unique_ptr<lora::Lora> lora;
  std::unique_ptr<lora::PeftAdapterReader> start;  // the starting adapter, or null

  // Unit `unit` (with storage, base weights loaded): its adapters, initialized or read.
  Status LoadUnitAdapters(CausalLm& model, int unit, uint64_t seed) const;
};

Result<LoraSetup> ApplyLora(const PreparedTraining& p, CausalLm& model);

}  // namespace air::engine::train
