// Rotary position embedding tables, computed as transformers does: inverse frequencies
// 1 / theta^(2i/D) in fp32, optionally rescaled by llama3's rule (REFERENCES.md §3), and for a
// token at position p the angles p * inv_freq[i] whose cos/sin feed Ops::RopeForward.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"

namespace air::engine {

// inv_freq (D/2) for the config's head_dim and rope settings.
std::vector<float> RopeInverseFrequencies(const ModelConfig& config);

// cos and sin (N, D/2) for N tokens at `positions` (N).
void RopeTables(const std::vector<float>& inv_freq, const int32_t* positions, int64_t n,
                std::vector<float>& cos, std::vector<float>& sin);

}  // namespace air::engine
