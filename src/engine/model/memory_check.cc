// Memory needed by a model vs memory available (see memory_check.h).
#include "engine/model/memory_check.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/strings.h"
#include "engine/backend/cpu/host_memory.h"
#include "engine/model/model_factory.h"

namespace air::engine {

double ParameterCount(const ModelConfig& config) {
  // The specs of a one-layer copy, layer 0 counted num_layers times: no list of every layer.
  ModelConfig one_layer = config;
  one_layer.num_layers = 1;
  double total = 0.0;
  for (const ParameterSpec& spec : ParameterSpecsFor(one_layer)) {
    double n = spec.layer < 0 ? 1.0 : static_cast<double>(config.num_layers);
    for (int64_t d : spec.shape) n *= static_cast<double>(d);
    total += n;
  }
  return total;
}

std::optional<uint64_t> AvailableMemoryBytes(Env* env) {
  const std::optional<DeviceMemory> memory = HostMemory(env);
  if (!memory) return std::nullopt;
  return memory->free_bytes;
}

ParameterBytes InferenceBytes(DType dtype) {
  ParameterBytes b;
  b.whole = static_cast<double>(DTypeSize(dtype));
  b.what = fmt::format("{} weights", DTypeName(dtype));
  return b;
}

ParameterBytes TrainingBytes(DType param_dtype, bool resident_copy, DType state_dtype) {
  ParameterBytes b;
  b.sharded = 4.0 * static_cast<double>(DTypeSize(state_dtype));  // master, gradient, m and v
  b.what = state_dtype == DType::kF32
               ? "fp32 master weights, gradients and AdamW moments"
               : fmt::format("{} weights, gradients and AdamW moments (torch_dtype)",
                             DTypeName(state_dtype));
  if (resident_copy && param_dtype != state_dtype) {
    b.whole = static_cast<double>(DTypeSize(param_dtype));
    b.what += fmt::format(", a whole {} copy", DTypeName(param_dtype));
  } else if (resident_copy) {
    // The whole copy is kept in the state's dtype and the master is (its share of) it: whole
    // parameters, sharded gradients and moments (SHARD_GRAD_OP; the same total unsharded).
    b.sharded = 3.0 * static_cast<double>(DTypeSize(state_dtype));
    b.whole = static_cast<double>(DTypeSize(param_dtype));
  }
  return b;
}

ParameterBytes LoraTrainingBytes(DType param_dtype, bool base_whole, double trainable_fraction) {
  ParameterBytes b;
  const double base = static_cast<double>(DTypeSize(param_dtype));
  (base_whole ? b.whole : b.sharded) += base;
  b.sharded += 16.0 * trainable_fraction;
  // Where the base stays whole (NO_SHARD, SHARD_GRAD_OP) the trained parameters keep a whole
  // compute copy in a param_dtype narrower than their fp32 masters (FSDP's resident copy).
  const bool resident_copy = base_whole && param_dtype != DType::kF32;
  if (resident_copy) b.whole += base * trainable_fraction;
  b.what = fmt::format(
      "the frozen base in {} (no fp32 master, gradients or optimizer state), fp32 master weights, "
      "gradients and AdamW moments{} for the {:.2f}% of parameters LoRA trains",
      DTypeName(param_dtype),
      resident_copy ? fmt::format(" and a {} compute copy", DTypeName(param_dtype)) : "",
      100.0 * trainable_fraction);
  return b;
}

namespace {

// The check against `available` bytes; `where` names the memory, `advice` what would lower the
// need.
Status CheckFits(const ModelConfig& config, const ParameterBytes& bytes, const std::string& purpose,
                 const MemoryShare& share, const WorkingBytes& working, int sharers,
                 uint64_t available, const std::string& where, const std::string& advice) {
  const double parameters = ParameterCount(config);
  const double per_parameter = bytes.sharded * share.per_rank + bytes.whole;
  const double needed = (parameters * per_parameter + working.bytes) * std::max(1, sharers);
  if (needed <= static_cast<double>(available)) return Status::Ok();
  auto human = [](double b) {
    return b >= 1.8e19 ? fmt::format("{:.3g} bytes", b) : HumanBytes(static_cast<uint64_t>(b));
  };
  const std::string shared =
      share.how.empty()
          ? std::string()
          : fmt::format("; {}: each rank holds {:.3g} of the sharded part{}", share.how,
                        share.per_rank,
                        sharers > 1 ? fmt::format(", and {} ranks share this host", sharers)
                                    : std::string());
  const std::string plus = working.bytes > 0
                               ? fmt::format("; plus {} of {}", human(working.bytes), working.what)
                               : std::string();
  return ResourceExhausted(
      fmt::format("the model needs at least {} of {} for {} ({:.4g} parameters x {:.3g} bytes "
                  "each: {}{}{}), but only {} is available; {}",
                  human(needed), where, purpose, parameters, per_parameter, bytes.what, plus,
                  shared, HumanBytes(available), advice));
}

}  // namespace

Status CheckModelFitsInMemory(Env* env, const ModelConfig& config, const ParameterBytes& bytes,
                              const std::string& purpose, const MemoryShare& share,
                              const WorkingBytes& working) {
  std::optional<uint64_t> available = AvailableMemoryBytes(env);
  if (!available) return Status::Ok();
  return CheckFits(config, bytes, purpose, share, working, share.ranks_on_host, *available,
                   "memory",
                   "use a smaller model, more ranks to shard over, or a machine with more memory");
}

Status CheckModelFitsOnDevice(const ModelConfig& config, const ParameterBytes& bytes,
                              const std::string& purpose, const MemoryShare& share,
                              uint64_t free_bytes, const std::string& device,
                              const WorkingBytes& working) {
  return CheckFits(config, bytes, purpose, share, working, 1, free_bytes, "GPU memory on " + device,
                   "keep the optimizer state in bf16 (torch_dtype: bfloat16), train LoRA "
                   "adapters (use_peft), shard over more GPUs, recompute activations "
                   "(activation_checkpointing) or use a smaller per_device_batch_size, or use a "
                   "smaller model");
}

}  // namespace air::engine
