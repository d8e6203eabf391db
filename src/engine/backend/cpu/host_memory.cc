// /proc/meminfo's MemAvailable and MemTotal (see host_memory.h).
#include "engine/backend/cpu/host_memory.h"

#include <sstream>
#include <string>

namespace air::engine {

std::optional<DeviceMemory> HostMemory(Env* env) {
  auto text = env->ReadFile("/proc/meminfo");
  if (!text.ok()) return std::nullopt;
  std::optional<uint64_t> available, total;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    // "MemAvailable:   23456789 kB"
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    if (key != "MemAvailable" && key != "MemTotal") continue;
    std::istringstream fields(line.substr(colon + 1));
    uint64_t kib = 0;
    std::string unit;
    if (!(fields >> kib >> unit) || unit != "kB") return std::nullopt;
    (key == "MemAvailable" ? available : total) = kib * 1024;
  }
  if (!available || !total) return std::nullopt;
  return DeviceMemory{.free_bytes = *available, .total_bytes = *total};
}

}  // namespace air::engine
