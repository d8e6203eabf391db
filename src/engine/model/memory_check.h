// A model's memory, checked before it is allocated: `air model init` of an 8B config, or
// `air train` of a model that cannot fit, should be a clear error naming the need and what the
// machine has — not std::bad_alloc (an abort) or the kernel's OOM killer (a SIGKILL) halfway.
//
// The need counted is the parameters' fp32 storage times a per-use factor (weights only for
// generation and init; weights, gradients and AdamW's two moments for training); activations
// come on top, so passing the check is necessary, not sufficient. The memory available is
// MemAvailable from /proc/meminfo (through the Env); where that cannot be read, the check passes.
// Stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/env.h"
#include "base/status.h"
#include "engine/model/model_config.h"

namespace air::engine {

// fp32 values held per parameter by each use.
inline constexpr int kFloatsPerParameterForInference = 1;  // weights
inline constexpr int kFloatsPerParameterForTraining = 4;   // weights, gradients, Adam m and v

// The parameter count of the model `config` describes (as a double: absurd configs overflow).
double ParameterCount(const ModelConfig& config);

// MemAvailable in bytes, or nullopt where /proc/meminfo cannot be read or parsed.
std::optional<uint64_t> AvailableMemoryBytes(Env* env);

// How a sharded run divides that storage: each rank holds `per_rank` of it (1/world for
// FULL_SHARD), and `ranks_on_host` ranks (LOCAL_WORLD_SIZE) share this host's memory.
struct MemoryShare {
  double per_rank = 1.0;
  int ranks_on_host = 1;
  std::string how;  // "FULL_SHARD over 16 ranks", for the message
};

// OK when the parameters' storage for `floats_per_parameter` (as `share` divides it among the
// ranks on this host) fits in the available memory; else ResourceExhausted naming `purpose`
// ("training", ...), the bytes needed and available.
Status CheckModelFitsInMemory(Env* env, const ModelConfig& config, int floats_per_parameter,
                              const std::string& purpose, const MemoryShare& share = {});

}  // namespace air::engine
