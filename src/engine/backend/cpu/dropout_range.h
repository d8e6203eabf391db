// Dropout over a range of floats for the fast CPU path: the mask of op_semantics.h's
// DropoutUniform (splitmix64 of the element's index), drawn 16 elements at a time with AVX-512F and
// AVX512DQ (vpmullq for splitmix64's 64-bit multiplies), else 8 at a time with AVX2 (the 64-bit
// multiplies from 32-bit ones) — the same bits as the scalar draw, so every backend, thread
// count and kernel level sees the same mask. Without AVX2 (or with AIR_CPU_KERNELS=generic) the
// scalar draw. Written by hand because the scalar loop does not vectorize (64-bit multiplies)
// and LoRA's dropout drew the mask three times per adapter and step (forward, and the
// backward's input and gradient): bench/lora spent 22% of a bf16 step in the scalar loop. LoRA
// now draws it once into bits (DropoutMaskRange) and applies those (ApplyDropoutMaskRange).
// Thread safety: pure function over its arguments.
#pragma once

#include <cstdint>

namespace air::engine {

// out[i] = x[i] * scale where element `first + i` of the mask of `seed` is kept at drop
// probability p (DropoutUniform(seed, first + i) >= p), else 0; for i < n. out may be x.
void DropoutRange(const float* x, float p, float scale, uint64_t seed, uint64_t first, int64_t n,
                  float* out);

// The same mask as bits: bit i % 8 of bits[i / 8] set when element `first + i` is kept, for
// i < n; the bits of the last byte past n clear. (DropoutRange is this and ApplyDropoutMaskRange,
// block by block.)
void DropoutMaskRange(float p, uint64_t seed, uint64_t first, int64_t n, uint8_t* bits);

// out[i] = (accumulate ? out[i] : 0) + (bit i % 8 of bits[i / 8] ? x[i] * scale : 0), i < n: the
// reference's fp32 product and sum (out may be x when not accumulating).
void ApplyDropoutMaskRange(const float* x, const uint8_t* bits, float scale, bool accumulate,
                           int64_t n, float* out);
// The same, written, for bf16 x and out (raw bits): each element widened, scaled in fp32 and
// rounded once in registers, as the fp32 form between WidenBf16 and RoundToBf16 gives it (out
// may be x).
void ApplyDropoutMaskRangeBf16(const uint16_t* x, const uint8_t* bits, float scale, int64_t n,
                               uint16_t* out);

}  // namespace air::engine
