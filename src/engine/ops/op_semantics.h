// The portable semantics of the ops (engine/ops/ops.h): the structs an op is called with and the
// small per-element rules every backend must agree on, in one header that the CPU backends
// (g++) and the CUDA kernels (nvcc: __host__ __device__) both compile, so no backend keeps its
// own copy of a mask rule, a counter-based random draw or the optimizer's formula.
//
// What lives here is what two backends would otherwise write twice and could get subtly
// different: which key a query may see (AttentionVisible), dropout's mask (DropoutUniform), the
// AdamW update of one element (AdamWElement: the same bits everywhere, provided the compiler
// does not contract a * b + c into a fused multiply-add: the CPU build passes -ffp-contract=off,
// the CUDA files that call it -fmad=false), RoPE's angle, bf16 rounding and the ignore label.
// Plain data and inline functions; no allocation, no host-only library.
// Thread safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define AIR_HD __host__ __device__
#else
#define AIR_HD
#endif

namespace air::engine {

// The label of a position that takes no loss (Hugging Face's -100).
inline constexpr int32_t kIgnoreIndex = -100;

// Shape and masking of one attention call. Queries are the tokens being computed; keys and
// values are the sequence they look at (the same tokens when training, the KV cache plus the
// new tokens when generating). Query i of a row sits at absolute index q_offset + i of the
// key sequence. Key j is visible to query i when
//   j <= q_offset + i                                     (causal)
//   and (sliding_window == 0 or (q_offset + i) - j < sliding_window)   (HF: kv > q - window)
//   and (no segments given or q_segments[i] == kv_segments[j])        (packing)
struct AttentionShape {
  int64_t batch = 0;           // B
  int64_t q_len = 0;           // Tq
  int64_t kv_len = 0;          // Tk: keys actually present (<= kv_capacity)
  int64_t kv_capacity = 0;     // rows per batch entry in the k/v buffers; 0 means kv_len
  int64_t q_heads = 0;         // Hq
  int64_t kv_heads = 0;        // Hkv; Hq % Hkv == 0, query head h reads kv head h / (Hq / Hkv)
  int64_t head_dim = 0;        // D
  int64_t q_offset = 0;        // absolute index of query 0 in the key sequence
  int64_t sliding_window = 0;  // 0: no window
  float scale = 1.0f;          // usually 1/sqrt(D)

  AIR_HD int64_t kv_rows() const { return kv_capacity > 0 ? kv_capacity : kv_len; }
};

// Whether key kj is visible to query qi of batch row b under AttentionShape's rules. Segments
// are (B, Tq) and (B, kv_rows) arrays, or both null.
AIR_HD inline bool AttentionVisible(const AttentionShape& s, int64_t b, int64_t qi, int64_t kj,
                                    const int32_t* q_segments, const int32_t* kv_segments) {
  const int64_t q_abs = s.q_offset + qi;
  if (kj > q_abs) return false;
  if (s.sliding_window > 0 && q_abs - kj >= s.sliding_window) return false;
  if (q_segments != nullptr && q_segments[b * s.q_len + qi] != kv_segments[b * s.kv_rows() + kj]) {
    return false;
  }
  return true;
}

// The per-step scalars of one AdamW update (train/adamw.h computes them in double, as torch
// does, and passes them in fp32).
struct AdamWScalars {
  float step_size = 0.0f;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt = 1.0f;  // sqrt(1 - beta2^t)
  float one_minus_beta1 = 0.1f;
  float beta2 = 0.999f;
  float one_minus_beta2 = 0.001f;
  float eps = 1e-8f;
  bool decay = false;         // apply decoupled weight decay to this tensor
  float decay_factor = 1.0f;  // 1 - lr * weight_decay
  // The gradient used is grad_scale * g (one fp32 product, the bits of scaling g in place
  // first): global-norm clipping's coefficient, applied without a pass of its own.
  float grad_scale = 1.0f;
};

// One element of torch.optim.AdamW in fp32 (ops.h's AdamWUpdate): every operation rounded on
// its own, IEEE sqrt and division.
AIR_HD inline void AdamWElement(const AdamWScalars& s, float& p, float g, float& m, float& v) {
  const float gs = g * s.grad_scale;
  if (s.decay) p *= s.decay_factor;
  m += s.one_minus_beta1 * (gs - m);
  v = v * s.beta2 + s.one_minus_beta2 * gs * gs;
  const float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
  p -= s.step_size * (m / denom);
}

// The uniform draw in [0, 1) that decides element i of a dropout mask with `seed` (splitmix64 of
// a counter: the same on every backend and thread count, and cheap to draw again, which is how a
// backward or a recomputed layer sees its forward's mask without storing it). 24 bits.
AIR_HD inline float DropoutUniform(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1.0p-24f;
}

// cos/sin of one RoPE angle: the fp32 product of the position and the inverse frequency (as
// transformers' matmul gives), then cos/sin in double rounded to fp32, then the fp32 product
// with `scale` (YaRN's attention factor; 1 leaves them as they are).
AIR_HD inline void RopeAngle(int32_t position, float inv_freq, float scale, float* cos_out,
                             float* sin_out) {
  const float angle = static_cast<float>(position) * inv_freq;
  *cos_out = static_cast<float>(cos(static_cast<double>(angle))) * scale;
  *sin_out = static_cast<float>(sin(static_cast<double>(angle))) * scale;
}

// bf16 <-> fp32 bits: round to nearest even, a NaN stays a NaN (quiet), infinities stay
// infinite — torch's `.to(torch.bfloat16)`.
// Without a branch, so that CPU loops of it vectorize.
AIR_HD inline uint16_t RoundToBf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}
AIR_HD inline float WidenBf16(uint16_t bf16) {
  const uint32_t bits = static_cast<uint32_t>(bf16) << 16;
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

// MXFP4 (GPT-OSS's experts as released; io/mxfp4.h): one E2M1 nibble (bit 3 the sign, then
// the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6: exponent bits 2..1, mantissa bit 0) under its
// group's E8M0 scale, ldexp(E2M1(nibble), scale - 127) as transformers computes it: exact in
// fp32 (subnormals down to 2^-128 included), ±inf past the float range, 0 stays ±0 (nibble 8 is
// -0) whatever the scale.
AIR_HD inline float Mxfp4Value(uint8_t nibble, uint8_t scale) {
  const int exponent = (nibble >> 1) & 3, mantissa = nibble & 1;
  const float magnitude = exponent == 0 ? 0.5f * static_cast<float>(mantissa)
                                        : (1.0f + 0.5f * static_cast<float>(mantissa)) *
                                              static_cast<float>(1 << (exponent - 1));
  const float value = ldexpf(magnitude, static_cast<int>(scale) - 127);
  return (nibble & 8) != 0 ? -value : value;
}

}  // namespace air::engine
