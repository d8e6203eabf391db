// GPU metrics of the GPUs a node sees, from NVIDIA's NVML (libnvidia-ml.so.1, the driver's),
// opened at run time (base/shared_library.h): air never links it, so a machine without the
// driver runs air unchanged. Per GPU, under MLflow's names (its GPUMonitor) where it has one:
//   gpu_<i>_utilization_percentage  gpu_<i>_memory_usage_megabytes  gpu_<i>_memory_usage_percentage
//   gpu_<i>_power_usage_watts       gpu_<i>_power_usage_percentage (of the enforced power limit)
// and air's gpu_<i>_memory_total_megabytes and gpu_<i>_temperature_celsius. <i> is the GPU's
// ordinal as the node's processes see it (cuda:<i>): its place in CUDA_VISIBLE_DEVICES (indices
// or GPU-<uuid>), or NVML's index when that is unset.
// No library (dlopen finds no libnvidia-ml.so.1) means no GPU metrics and no note; a library
// that cannot be loaded or used, or an NVML call that fails (other than "not supported" for one
// metric), means no GPU metrics from then on and one note saying why.
// Thread safety: one NvmlReader is used by one thread (NVML itself is thread-safe).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace air::agent {

class NvmlReader {
 public:
  // The GPUs of `cuda_visible_devices` (nullopt: every GPU NVML finds; "": none). nullptr when
  // there are none to read; then `note` says why when it was an error, and stays empty when
  // NVML is simply absent or no GPU is visible.
  static std::unique_ptr<NvmlReader> Open(const std::optional<std::string>& cuda_visible_devices,
                                          std::string* note);
  ~NvmlReader();
  NvmlReader(const NvmlReader&) = delete;
  NvmlReader& operator=(const NvmlReader&) = delete;

  // Appends each GPU's metrics. False, with `note`, when NVML reported an error: stop reading.
  bool Read(std::vector<std::pair<std::string, double>>* metrics, std::string* note);

  struct Api;

 private:
  struct Device {
    int ordinal = 0;
    void* handle = nullptr;  // nvmlDevice_t
  };
  NvmlReader(const Api* api, std::vector<Device> devices)
      : api_(api), devices_(std::move(devices)) {}

  const Api* api_;
  std::vector<Device> devices_;
};

}  // namespace air::agent
