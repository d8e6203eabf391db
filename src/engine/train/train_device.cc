// Choosing and checking a rank's device (see train_device.h).
#include "engine/train/train_device.h"

#include <fmt/format.h>

#include <cstdlib>

#include "engine/backend/registry.h"

namespace air::engine::train {

namespace {

std::string VisibleDevices() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible == nullptr ? "CUDA_VISIBLE_DEVICES is not set"
                            : fmt::format("CUDA_VISIBLE_DEVICES={}", visible);
}

Status AtDevice(const TrainConfig& config, const Status& status) {
  return Status(status.code(), fmt::format("{}: {}", config.Where("device"), status.message()));
}

}  // namespace

std::string TrainingDeviceChoices() { return "cpu, cuda, cuda:N, auto"; }

bool IsTrainingDevice(const std::string& text) { return text == "auto" || ParseDevice(text).ok(); }

Result<Device> ChooseTrainingDevice(const TrainConfig& config, const parallel::DistEnv& dist,
                                    const Result<int>& visible_gpus, std::string* note) {
  const std::string& asked = config.device;
  if (asked == "cpu") {
    if (config.ddp_backend == "nccl") {
      return InvalidArgument(fmt::format(
          "{}: ddp_backend: nccl runs between GPUs, and device is cpu; use device: cuda, or "
          "ddp_backend: gloo",
          config.Where("ddp_backend")));
    }
    return Device{};
  }
  const bool none = !visible_gpus.ok() || *visible_gpus == 0;
  if (asked == "auto" && none) {
    *note = fmt::format("device: auto trains on the CPU: {}",
                        visible_gpus.ok() ? "no GPU is visible" : visible_gpus.status().message());
    return Device{};
  }
  if (!visible_gpus.ok()) return AtDevice(config, visible_gpus.status());
  const int gpus = *visible_gpus;
  if (gpus == 0) {
    return AtDevice(config, FailedPrecondition(fmt::format(
                                "no CUDA device is visible ({}); train on the CPU with device: cpu",
                                VisibleDevices())));
  }
  Result<Device> parsed = ParseDevice(asked == "auto" ? "cuda" : asked);
  if (!parsed.ok()) return AtDevice(config, parsed.status());
  const bool by_local_rank = asked == "cuda" || asked == "auto";
  const Device device{DeviceType::kCuda, by_local_rank ? dist.local_rank : parsed->index};
  if (by_local_rank && dist.local_rank >= gpus) {
    return AtDevice(
        config,
        InvalidArgument(fmt::format(
            "LOCAL_RANK {} has no GPU: {} CUDA device{} visible ({}); run at most {} rank{} per "
            "node (nproc_per_node), one per GPU",
            dist.local_rank, gpus, gpus == 1 ? " is" : "s are", VisibleDevices(), gpus,
            gpus == 1 ? "" : "s")));
  }
  if (!by_local_rank && device.index >= gpus) {
    return AtDevice(config, InvalidArgument(fmt::format(
                                "{} does not exist: {} CUDA device{} visible ({})", asked, gpus,
                                gpus == 1 ? " is" : "s are", VisibleDevices())));
  }
  // Several ranks on one GPU: NCCL refuses them; the host-staged gloo group takes them.
  if (!by_local_rank && dist.local_world_size > 1 && config.ddp_backend != "gloo") {
    return AtDevice(config, InvalidArgument(fmt::format(
                                "{} puts all {} ranks of this node on one GPU, which NCCL refuses; "
                                "use device: cuda (each rank takes the GPU of its LOCAL_RANK), or "
                                "ddp_backend: gloo (collectives staged through the host)",
                                asked, dist.local_world_size)));
  }
  return device;
}

Result<TrainingDevice> ResolveTrainingDevice(const TrainConfig& config,
                                             const parallel::DistEnv& dist) {
  TrainingDevice out;
  const Result<int> gpus = config.device == "cpu" ? Result<int>(0) : VisibleGpuCount();
  AIR_ASSIGN_OR_RETURN(out.device, ChooseTrainingDevice(config, dist, gpus, &out.note));
  if (out.device.type == DeviceType::kCpu) return out;
  Result<std::shared_ptr<Backend>> backend = CreateBackend(ForDevice(out.device));
  if (!backend.ok()) return AtDevice(config, backend.status());
  out.gpu = *backend;
  out.description = out.device.ToString() + ", " + out.gpu->Describe();
  Result<DeviceMemory> memory = out.gpu->QueryMemory();
  if (!memory.ok()) return AtDevice(config, memory.status());
  out.memory = *memory;
  return out;
}

}  // namespace air::engine::train
