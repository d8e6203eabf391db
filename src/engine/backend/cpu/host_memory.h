// The host's memory as /proc/meminfo states it: MemAvailable (what can be allocated without
// swapping, counting reclaimable caches) and MemTotal. The CPU backends' QueryMemory and the
// model's fit check (model/memory_check.h) read it here, through the Env so tests can give a
// machine of any size. Stateless; thread-safe.
#pragma once

#include <optional>

#include "base/env.h"
#include "engine/backend/backend.h"

namespace air::engine {

// {MemAvailable, MemTotal} in bytes; nullopt where /proc/meminfo cannot be read or lacks them.
std::optional<DeviceMemory> HostMemory(Env* env);

}  // namespace air::engine
