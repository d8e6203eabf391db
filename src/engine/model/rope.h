// Rotary position embedding's inverse frequencies, computed as transformers does:
// 1 / theta^(2i/D) in fp32, optionally rescaled by llama3's rule (REFERENCES.md §3) or, for
// GPT-OSS, by YaRN. The model
// keeps them on the device; Ops::RopeTables turns a batch's positions into the angles
// p * inv_freq[i] whose cos/sin feed Ops::RopeForward.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/gpt_oss_config.h"
#include "engine/model/model_config.h"

namespace air::engine {

// inv_freq (D/2) for the config's head_dim and rope settings.
std::vector<float> RopeInverseFrequencies(const ModelConfig& config);

// GPT-OSS's inv_freq (D/2): default RoPE, or YaRN as transformers' _compute_yarn_parameters
// computes it in fp32 — the extrapolated 1/theta^(2i/D) and interpolated 1/(factor theta^(2i/D))
// frequencies blended by a linear ramp between the correction dimensions of beta_fast and
// beta_slow (floored/ceiled when truncate). The cos/sin scale is config.rope.attention_factor.
std::vector<float> GptOssRopeInverseFrequencies(const GptOssConfig& config);

}  // namespace air::engine
