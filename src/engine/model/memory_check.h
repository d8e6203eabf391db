// A model's memory, checked before it is allocated: `air model init` of an 8B config, or
// `air train` of a model that cannot fit, should be a clear error naming the need and what the
// machine has — not std::bad_alloc (an abort) or the kernel's OOM killer (a SIGKILL) halfway.
//
// The need counted is the parameters' storage at each dtype's size (model/parameter bytes per
// use: fp32 weights for generation and init; for training the fp32 master weights, gradients and
// AdamW's two moments, sharded, plus a whole param_dtype copy where a strategy keeps one), plus
// the working memory the caller counts (training: the activations of a micro-batch, measured
// from the model's own layout, and FSDP's gather/reduce buffers). The memory available
// is MemAvailable from /proc/meminfo (through the Env); where that cannot be read, the check
// passes. Stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/env.h"
#include "base/status.h"
#include "engine/dtype.h"
#include "engine/model/model_config.h"

namespace air::engine {

// Bytes held per parameter by a use: `sharded` is divided among the ranks that shard it
// (MemoryShare::per_rank), `whole` is held whole by every rank.
struct ParameterBytes {
  double sharded = 0.0;
  double whole = 0.0;
  std::string what;  // "fp32 master weights, gradients, AdamW moments; ..." for the message
};
// Weights in `dtype` (generation, init).
ParameterBytes InferenceBytes(DType dtype = DType::kF32);
// Training: master weights, gradients and two AdamW moments in `state_dtype` (fp32: 16 bytes;
// bf16, torch_dtype bfloat16: 8; sharded), plus a whole copy in `param_dtype` when the strategy
// keeps one resident (`resident_copy`) and it differs from the state's (else it is the master).
ParameterBytes TrainingBytes(DType param_dtype, bool resident_copy,
                             DType state_dtype = DType::kF32);
// LoRA training: the frozen base in `param_dtype` (sharded, or whole where the strategy keeps
// parameters whole: `base_whole`), and for the trained `trainable_fraction` of the parameters
// (adapters, modules_to_save) the 16 bytes of TrainingBytes, plus, where the base is whole and
// `param_dtype` is narrower than fp32, their whole compute copy in it.
ParameterBytes LoraTrainingBytes(DType param_dtype, bool base_whole, double trainable_fraction);

// The parameter count of the model `config` describes (as a double: absurd configs overflow).
double ParameterCount(const ModelConfig& config);

// MemAvailable in bytes, or nullopt where /proc/meminfo cannot be read or parsed.
std::optional<uint64_t> AvailableMemoryBytes(Env* env);

// How a sharded run divides the sharded storage: each rank holds `per_rank` of it (1/world),
// and `ranks_on_host` ranks (LOCAL_WORLD_SIZE) share this host's memory.
struct MemoryShare {
  double per_rank = 1.0;
  int ranks_on_host = 1;
  std::string how;  // "FULL_SHARD over 16 ranks", for the message
};

// What a rank holds besides the parameters' storage: training's activations and FSDP's buffers,
// per rank (0: none counted).
struct WorkingBytes {
  double bytes = 0.0;
  std::string what;  // "activations and FSDP buffers for a micro-batch of 4 x 1024"
};

// OK when the parameters' storage (`bytes` per parameter, as `share` divides it among the ranks
// on this host) and `working` fit in the available memory; else ResourceExhausted naming
// `purpose` ("training", ...), the bytes needed and available.
Status CheckModelFitsInMemory(Env* env, const ModelConfig& config, const ParameterBytes& bytes,
                              const std::string& purpose, const MemoryShare& share = {},
                              const WorkingBytes& working = {});

// The same for one GPU's memory: `free_bytes` of `device` ("cuda:0, NVIDIA H200 ..."), held by
// this rank alone (share.ranks_on_host does not apply). The advice names what lowers the need
// on a GPU.
Status CheckModelFitsOnDevice(const ModelConfig& config, const ParameterBytes& bytes,
                              const std::string& purpose, const MemoryShare& share,
                              uint64_t free_bytes, const std::string& device,
                              const WorkingBytes& working = {});

}  // namespace air::engine
