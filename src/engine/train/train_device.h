// The device a rank of `air train` computes on, from the `device` parameter and the launcher's
// variables, checked before anything is loaded:
//   cpu      the CPU backend (the default)
//   cuda     the GPU of this rank's LOCAL_RANK among those CUDA_VISIBLE_DEVICES shows: one process
//            per GPU, as torchrun runs them
//   cuda:N   GPU N of the visible ones
//   auto     cuda when this build has the CUDA backend and a GPU is visible, else cpu (the plan
//            says which, and why not the GPU)
// Every refusal names the parameter, what is missing and the way out: a build without the CUDA
// backend or a machine without a usable GPU or driver (the CPU path named), a LOCAL_RANK past the
// visible GPUs, several ranks on one GPU under NCCL (ddp_backend: gloo stages them through the
// host), NCCL asked for on the CPU.
// Thread safety: stateless (the CUDA probe is the registry's, once per process).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/parallel/dist_env.h"
#include "engine/train/train_config.h"

namespace air::engine::train {

struct TrainingDevice {
  Device device;  // cpu or cuda:N
  // For a GPU: its backend (created here, used for the run), its description and its memory
  // when the plan was made. Null for the CPU, whose backend the run creates with its threads.
  std::shared_ptr<Backend> gpu;
  std::string description;  // "cuda:0, NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"
  DeviceMemory memory;
  // Why `auto` chose the CPU ("" otherwise), for the plan's notes.
  std::string note;
};

// The parameter's values, for messages: "cpu, cuda, cuda:N, auto".
std::string TrainingDeviceChoices();
// Whether `text` is one of them (the parameter's validation).
bool IsTrainingDevice(const std::string& text);

// The device for this rank, given how many GPUs this process can use (or why none):
// everything but creating the backend, so every refusal can be tested without a GPU. `note`
// receives why `auto` chose the CPU.
Result<Device> ChooseTrainingDevice(const TrainConfig& config, const parallel::DistEnv& dist,
                                    const Result<int>& visible_gpus, std::string* note);

// ChooseTrainingDevice with this machine's GPUs (VisibleGpuCount), then the GPU's backend.
Result<TrainingDevice> ResolveTrainingDevice(const TrainConfig& config,
                                             const parallel::DistEnv& dist);

}  // namespace air::engine::train
