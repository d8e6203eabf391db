// Vectorized exponentials and row maxima for the fast CPU path: the softmax-style loops of
// cross-entropy and attention and the SiLU of SwiGLU, which otherwise spend their time in scalar
// expf. With AVX-512 or AVX2+FMA (chosen at run time: cpu_features.h) exp is a range reduction to
// [-ln2/2, ln2/2], a degree-6 polynomial and a scale by 2^n (about 1 ulp, the same bits on
// both); without them, std::exp. Results agree with the
// reference ops within float rounding (tests/unit/engine_core/vec_math_test.cc).
// Thread safety: pure functions over their arguments.
#pragma once

#include <cstdint>

namespace air::engine {

// e_i = exp(x[i] - shift) for i < n; when `out` is not null, out[i] = scale * e_i (out may be
// x). Returns the sum of the e_i, accumulated in double.
double ExpShifted(const float* x, float shift, float scale, int64_t n, float* out);

// e_i = exp(x_scale * x[i] - shift), the product rounded to float before the subtraction (the
// bits ExpShifted gives on x already scaled); out[i] = e_i when `out` is not null (out may be
// x). Returns the sum of the e_i, accumulated in double: attention's softmax on raw scores.
double ExpOfScaled(const float* x, float x_scale, float shift, int64_t n, float* out);

// The largest of start and x[0..n), as a loop of std::max(m, x[i]) gives it (a NaN x[i] is
// skipped, a NaN start stays): the row maxima of softmax and cross-entropy.
float MaxOf(const float* x, int64_t n, float start);

// The sum over i < n of a[i] * b[i] * c[i]: each product rounded in float (as a scalar loop
// computes it), the sum accumulated in double over 16 interleaved partial sums (RMSNorm's
// backward row dot product).
double SumOfProducts(const float* a, const float* b, const float* c, int64_t n);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).
void SwigluForwardRange(const float* gate, const float* up, int64_t n, float* out);

// dgate[i] += dout[i] * up[i] * s (1 + g (1 - s)), dup[i] += dout[i] * g * s, s = sigmoid(g).
void SwigluBackwardRange(const float* gate, const float* up, const float* dout, int64_t n,
                         float* dgate, float* dup);

// RMSNorm's backward over one row: dx[i] += inv * w[i] * dy[i] - coef * x[i] and, when
// dw_partial is not null, dw_partial[i] += double(dy[i] * x[i] * inv) — each operation rounded
// on its own in the scalar loop's order (the same bits with and without AVX-512).
void RmsNormBackwardRow(const float* w, const float* dy, const float* x, float inv, float coef,
                        int64_t n, float* dx, double* dw_partial);

}  // namespace air::engine
