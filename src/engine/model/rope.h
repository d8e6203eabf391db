// Rotary position embedding's inverse frequencies, computed as transformers does:
// 1 / theta^(2i/D) in fp32, optionally rescaled by llama3's rule (REFERENCES.md §3). The model
// keeps them on the device; Ops::RopeTables turns a batch's positions into the angles
// p * inv_freq[i] whose cos/sin feed Ops::RopeForward.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"

namespace air::engine {

// inv_freq (D/2) for the config's head_dim and rope settings.
std::vector<float> RopeInverseFrequencies(const ModelConfig& config);

}  // namespace air::engine
