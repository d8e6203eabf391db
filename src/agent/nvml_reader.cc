// NVML opened at run time: the few calls GPU metrics need.
#include "agent/nvml_reader.h"

#include <fmt/format.h>

#include "base/shared_library.h"
#include "base/strings.h"

namespace air::agent {
namespace nvml_abi {

// NVML's ABI as nvml.h declares it (NVML API 12 and 13 agree on these): nvmlReturn_t is an
// enum (an int), nvmlDevice_t an opaque pointer, and the two structs air reads.
using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlErrorNotSupported = 3;  // NVML_ERROR_NOT_SUPPORTED
constexpr int kNvmlTemperatureGpu = 0;            // NVML_TEMPERATURE_GPU
struct NvmlUtilization {                          // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {  // nvmlMemory_t (v1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

}  // namespace nvml_abi
namespace {

using nvml_abi::kNvmlErrorNotSupported;
using nvml_abi::kNvmlSuccess;
using nvml_abi::kNvmlTemperatureGpu;
using nvml_abi::NvmlDevice;
using nvml_abi::NvmlMemory;
using nvml_abi::NvmlReturn;
using nvml_abi::NvmlUtilization;
constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";
constexpr double kBytesPerMegabyte = 1e6;  // MLflow's megabytes

// True when dlopen found no such library at all (as opposed to one it could not load).
bool LibraryAbsent(const std::string& message) {
  return message.find(std::string(kNvmlLibrary) +
                      ": cannot open shared object file: No such file or directory") !=
         std::string::npos;
}

bool IsDecimalIndex(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

struct NvmlReader::Api {
  NvmlReturn (*init)() = nullptr;                                       // nvmlInit_v2
  NvmlReturn (*shutdown)() = nullptr;                                   // nvmlShutdown
  const char* (*error_string)(NvmlReturn) = nullptr;                    // nvmlErrorString
  NvmlReturn (*count)(unsigned int*) = nullptr;                         // nvmlDeviceGetCount_v2
  NvmlReturn (*by_index)(unsigned int, NvmlDevice*) = nullptr;          // ..GetHandleByIndex_v2
  NvmlReturn (*by_uuid)(const char*, NvmlDevice*) = nullptr;            // ..GetHandleByUUID
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;    // ..GetUtilizationRates
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;              // ..GetMemoryInfo
  NvmlReturn (*power)(NvmlDevice, unsigned int*) = nullptr;             // ..GetPowerUsage (mW)
  NvmlReturn (*power_limit)(NvmlDevice, unsigned int*) = nullptr;       // ..GetEnforcedPowerLimit
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned int*) = nullptr;  // ..GetTemperature (C)

  // "nvmlInit_v2: Driver Not Loaded (NVML error 9)".
  std::string Error(const char* call, NvmlReturn rc) const {
    const char* text = error_string != nullptr ? error_string(rc) : nullptr;
    return fmt::format("{}: {} (NVML error {})", call, text != nullptr ? text : "unknown error",
                       rc);
  }
};

std::unique_ptr<NvmlReader> NvmlReader::Open(const std::optional<std::string>& visible,
                                             std::string* note) {
  note->clear();
  if (visible && Trim(*visible).empty()) return nullptr;  // CUDA_VISIBLE_DEVICES="": no GPU
  auto library = SharedLibrary::Open(kNvmlLibrary, "GPU metrics",
                                     "GPU metrics need the NVIDIA driver's NVML library");
  if (!library.ok()) {
    if (!LibraryAbsent(library.status().message())) {
      *note = "no GPU metrics: " + library.status().message();
    }
    return nullptr;
  }
  // The library stays loaded for the process's life (SharedLibrary never closes it).
  static Api api;
  library->Resolve("nvmlInit_v2", &api.init);
  library->Resolve("nvmlShutdown", &api.shutdown);
  library->Resolve("nvmlErrorString", &api.error_string);
  library->Resolve("nvmlDeviceGetCount_v2", &api.count);
  library->Resolve("nvmlDeviceGetHandleByIndex_v2", &api.by_index);
  library->Resolve("nvmlDeviceGetHandleByUUID", &api.by_uuid);
  library->Resolve("nvmlDeviceGetUtilizationRates", &api.utilization);
  library->Resolve("nvmlDeviceGetMemoryInfo", &api.memory);
  library->Resolve("nvmlDeviceGetPowerUsage", &api.power);
  library->Resolve("nvmlDeviceGetEnforcedPowerLimit", &api.power_limit);
  library->Resolve("nvmlDeviceGetTemperature", &api.temperature);
  if (Status complete = library->Complete("air needs NVML from an NVIDIA driver of 2014 or newer");
      !complete.ok()) {
    *note = "no GPU metrics: " + complete.message();
    return nullptr;
  }
  if (NvmlReturn rc = api.init(); rc != kNvmlSuccess) {
    *note = "no GPU metrics: " + api.Error("nvmlInit_v2", rc);
    return nullptr;
  }
  auto fail = [&](const std::string& why) -> std::unique_ptr<NvmlReader> {
    *note = "no GPU metrics: " + why;
    api.shutdown();
    return nullptr;
  };
  unsigned int count = 0;
  if (NvmlReturn rc = api.count(&count); rc != kNvmlSuccess) {
    return fail(api.Error("nvmlDeviceGetCount_v2", rc));
  }
  std::vector<Device> devices;
  if (!visible) {
    for (unsigned int i = 0; i < count; ++i) {
      NvmlDevice handle = nullptr;
      if (NvmlReturn rc = api.by_index(i, &handle); rc != kNvmlSuccess) {
        return fail(api.Error("nvmlDeviceGetHandleByIndex_v2", rc));
      }
      devices.push_back({static_cast<int>(i), handle});
    }
  } else {
    // As CUDA reads CUDA_VISIBLE_DEVICES: the list ends at the first entry it cannot use.
    for (const std::string& part : Split(*visible, ',')) {
      const std::string entry(Trim(part));
      NvmlDevice handle = nullptr;
      NvmlReturn rc = kNvmlSuccess;
      const char* call = "";
      if (IsDecimalIndex(entry) && entry.size() < 6) {
        const unsigned int index = static_cast<unsigned int>(std::stoul(entry));
        if (index >= count) break;
        call = "nvmlDeviceGetHandleByIndex_v2";
        rc = api.by_index(index, &handle);
      } else if (StartsWith(entry, "GPU-") || StartsWith(entry, "MIG-")) {
        call = "nvmlDeviceGetHandleByUUID";
        rc = api.by_uuid(entry.c_str(), &handle);
      } else {
        break;
      }
      if (rc != kNvmlSuccess) {
        return fail(fmt::format("{} (CUDA_VISIBLE_DEVICES entry {})", api.Error(call, rc), entry));
      }
      devices.push_back({static_cast<int>(devices.size()), handle});
    }
  }
  if (devices.empty()) {
    api.shutdown();
    return nullptr;
  }
  return std::unique_ptr<NvmlReader>(new NvmlReader(&api, std::move(devices)));
}

NvmlReader::~NvmlReader() { api_->shutdown(); }

bool NvmlReader::Read(std::vector<std::pair<std::string, double>>* metrics, std::string* note) {
  for (const Device& device : devices_) {
    const std::string prefix = fmt::format("gpu_{}_", device.ordinal);
    // A metric this GPU does not support is left out; any other error ends GPU metrics.
    auto check = [&](const char* call, NvmlReturn rc) {
      if (rc == kNvmlSuccess || rc == kNvmlErrorNotSupported) return true;
      *note =
          fmt::format("GPU metrics stopped: {} (gpu {})", api_->Error(call, rc), device.ordinal);
      return false;
    };
    NvmlUtilization utilization{};
    NvmlReturn rc = api_->utilization(device.handle, &utilization);
    if (!check("nvmlDeviceGetUtilizationRates", rc)) return false;
    if (rc == kNvmlSuccess)
      metrics->emplace_back(prefix + "utilization_percentage", utilization.gpu);
    NvmlMemory memory{};
    rc = api_->memory(device.handle, &memory);
    if (!check("nvmlDeviceGetMemoryInfo", rc)) return false;
    if (rc == kNvmlSuccess) {
      metrics->emplace_back(prefix + "memory_usage_megabytes", memory.used / kBytesPerMegabyte);
      metrics->emplace_back(prefix + "memory_total_megabytes", memory.total / kBytesPerMegabyte);
      if (memory.total > 0) {
        metrics->emplace_back(prefix + "memory_usage_percentage",
                              100.0 * static_cast<double>(memory.used) / memory.total);
      }
    }
    unsigned int milliwatts = 0;
    rc = api_->power(device.handle, &milliwatts);
    if (!check("nvmlDeviceGetPowerUsage", rc)) return false;
    if (rc == kNvmlSuccess) {
      metrics->emplace_back(prefix + "power_usage_watts", milliwatts / 1000.0);
      unsigned int limit = 0;
      NvmlReturn limit_rc = api_->power_limit(device.handle, &limit);
      if (!check("nvmlDeviceGetEnforcedPowerLimit", limit_rc)) return false;
      if (limit_rc == kNvmlSuccess && limit > 0) {
        metrics->emplace_back(prefix + "power_usage_percentage", 100.0 * milliwatts / limit);
      }
    }
    unsigned int celsius = 0;
    rc = api_->temperature(device.handle, kNvmlTemperatureGpu, &celsius);
    if (!check("nvmlDeviceGetTemperature", rc)) return false;
    if (rc == kNvmlSuccess) metrics->emplace_back(prefix + "temperature_celsius", celsius);
  }
  return true;
}

}  // namespace air::agent
