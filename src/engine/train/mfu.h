// Model FLOPs utilization for `air train` (docs/engine-training.md, "MFU"): the training FLOPs
// one token costs a dense model, and the dense bf16 peak of the GPUs whose datasheets give it.
// MFU = tokens/s x FLOPs per token / the device's peak; air train logs it as the metric `mfu`
// (rank 0's throughput against one GPU's peak) only where both are known — never for the CPU,
// an fp32 run, a mixture-of-experts model or a GPU missing from the table.
//
// FLOPs per token follow PaLM's appendix B (as nanoGPT and torchtitan count them): 6 per
// parameter of every matmul (forward 2, backward 4) plus 12 x layers x q_dim x sequence length
// for attention; with LoRA the frozen base costs 4 per parameter (no weight gradients). The
// sequence length is max_seq_len (each layer's sliding window where shorter): an upper bound of
// what real, shorter sequences cost.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "engine/dtype.h"
#include "engine/model/model_config.h"

namespace air::engine::train {

// The dense (no sparsity) peak FLOP/s of one GPU for `compute` (bf16 or fp16), from its name as
// the CUDA backend describes it ("NVIDIA H100 80GB HBM3 (sm_90, ...)"); nullopt when unknown.
std::optional<double> PeakDenseFlops(std::string_view device_name, DType compute);

// Training FLOPs per token of a dense model (nullopt for mixture-of-experts models).
std::optional<double> TrainingFlopsPerToken(const ModelConfig& config, int64_t seq_len, bool lora);

}  // namespace air::engine::train
