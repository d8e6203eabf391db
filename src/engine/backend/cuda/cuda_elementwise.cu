// The CUDA backend's elementwise kernels (cuda_kernels.h): Fill, Convert, the in-place adds,
// dropout (drawn, or its mask kept as bits and applied), scaling, SwiGLU, the embedding lookup and
// RoPE. Hand-written because no library kernel computes these ops with the CPU reference's exact
// semantics: op_semantics.h's dropout mask and RoPE angles, bf16 rounding to nearest even once per
// output, and the reference's fp32 operation order (backend/cpu/reference_loops.cc), so that every
// op here but SwiGLU gives the reference's bits. That needs this file compiled with -fmad=false
// (CMakeLists.txt): nvcc would otherwise contract RoPE's x1 * c - x2 * s into a fused multiply-add
// and round once, not twice. SwiGLU runs in fp32 with expf where the reference uses double (a few
// ulp apart).
//
// Flat ops run ElementwiseKernel's grid-stride loop, matrix-shaped ones (bias, embedding rows,
// RoPE's tokens) RowsKernel's (cuda_loops.cuh), both in packs of 8 elements where the pointers
// and row lengths allow and element by element otherwise (the same results).
// Thread safety: launchers are stateless; calls on one stream are ordered by it.
#include <cstdint>

#include "engine/backend/cuda/cuda_common.cuh"
#include "engine/backend/cuda/cuda_loops.cuh"

namespace air::engine::cuda {
namespace {

__device__ __forceinline__ In F32In(const float* p) { return In{p, DType::kF32}; }

// ---- flat bodies: Run<N>(i) handles elements i .. i + N ----------------------------------------

struct FillBody {
  Out dst;
  float value;
  template <int N>
  __device__ void Run(int64_t i) const {
    float v[N];
    for (int k = 0; k < N; ++k) v[k] = value;
    StoreN<N>(dst, i, v);
  }
};

struct ConvertBody {
  In src;
  Out dst;
  template <int N>
  __device__ void Run(int64_t i) const {
    float v[N];
    LoadN<N>(src, i, v);
    StoreN<N>(dst, i, v);
  }
};

// y += x: one fp32 add per element, rounded once into y.
struct AddBody {
  Out y;
  In x;
  template <int N>
  __device__ void Run(int64_t i) const {
    float a[N], b[N];
    LoadN<N>(y, i, a);
    LoadN<N>(x, i, b);
    for (int k = 0; k < N; ++k) a[k] += b[k];
    StoreN<N>(y, i, a);
  }
};

// out = keep ? x * scale : 0, scale = 1 / (1 - p) computed once on the host in fp32.
struct DropoutBody {
  In x;
  Out out;
  float p, scale;
  uint64_t seed;
  template <int N>
  __device__ void Run(int64_t i) const {
    float v[N];
    LoadN<N>(x, i, v);  // the whole pack is read before any of it is written: out may alias x
    for (int k = 0; k < N; ++k) {
      const bool keep = DropoutUniform(seed, static_cast<uint64_t>(i + k)) >= p;
      v[k] = keep ? v[k] * scale : 0.0f;
    }
    StoreN<N>(out, i, v);
  }
};

// bits[j] for the mask bytes j .. j + N: each byte's 8 draws (none past n).
struct DropoutMaskBody {
  uint8_t* bits;
  int64_t n;
  float p;
  uint64_t seed;
  template <int N>
  __device__ void Run(int64_t j) const {
    for (int k = 0; k < N; ++k) {
      uint8_t byte = 0;
      for (int b = 0; b < 8; ++b) {
        const int64_t i = 8 * (j + k) + b;
        if (i < n && DropoutUniform(seed, static_cast<uint64_t>(i)) >= p) byte |= 1u << b;
      }
      bits[j + k] = byte;
    }
  }
};

// out = (accumulate ? out : 0) + (kept ? x * scale : 0), the reference's fp32 product and sum.
struct ApplyDropoutMaskBody {
  In x;
  const uint8_t* bits;
  Out out;
  float scale;
  bool accumulate;
  template <int N>
  __device__ void Run(int64_t i) const {
    float v[N], o[N];
    LoadN<N>(x, i, v);  // read before written: out may alias x when not accumulating
    if (accumulate) LoadN<N>(out, i, o);
    for (int k = 0; k < N; ++k) {
      const int64_t e = i + k;
      const float kept = (bits[e / 8] >> (e % 8)) & 1u ? v[k] * scale : 0.0f;
      v[k] = accumulate ? o[k] + kept : kept;
    }
    StoreN<N>(out, i, v);
  }
};

struct ScaleBody {
  Out x;
  float factor;
  template <int N>
  __device__ void Run(int64_t i) const {
    float v[N];
    LoadN<N>(x, i, v);
    for (int k = 0; k < N; ++k) v[k] *= factor;
    StoreN<N>(x, i, v);
  }
};

// silu(g) = g * s with s = 1 / (1 + exp(-g)); exp(-g) = inf for g < -88 gives s = 0 (g * s = -0).
__device__ __forceinline__ float Sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// out = (g * s) * up, the reference's order (g * Sigmoid(g) * up) in fp32.
struct SwigluForwardBody {
  In gate, up;
  Out out;
  template <int N>
  __device__ void Run(int64_t i) const {
    float g[N], u[N];
    LoadN<N>(gate, i, g);
    LoadN<N>(up, i, u);
    for (int k = 0; k < N; ++k) g[k] = g[k] * Sigmoid(g[k]) * u[k];
    StoreN<N>(out, i, g);
  }
};

// dgate += (dout * up) * s * (1 + g * (1 - s)); dup += (dout * g) * s: the reference's order.
struct SwigluBackwardBody {
  In gate, up, dout;
  Out dgate, dup;
  template <int N>
  __device__ void Run(int64_t i) const {
    float g[N], u[N], d[N], dg[N], du[N];
    LoadN<N>(gate, i, g);
    LoadN<N>(up, i, u);
    LoadN<N>(dout, i, d);
    LoadN<N>(dgate, i, dg);
    LoadN<N>(dup, i, du);
    for (int k = 0; k < N; ++k) {
      const float s = Sigmoid(g[k]);
      dg[k] += d[k] * u[k] * s * (1.0f + g[k] * (1.0f - s));
      du[k] += d[k] * g[k] * s;
    }
    StoreN<N>(dgate, i, dg);
    StoreN<N>(dup, i, du);
  }
};

// ---- matrix bodies: Run<N>(row, col) handles columns col .. col + N of a row
// ---------------------

// y (rows, cols) += bias (cols)
struct AddBiasBody {
  Out y;
  In bias;
  int64_t cols;
  template <int N>
  __device__ void Run(int64_t r, int64_t c) const {
    float a[N], b[N];
    LoadN<N>(y, r * cols + c, a);
    LoadN<N>(bias, c, b);
    for (int k = 0; k < N; ++k) a[k] += b[k];
    StoreN<N>(y, r * cols + c, a);
  }
};

// c (rows, cols; row stride ld) = beta * c, or 0 without reading c when beta == 0.
struct ScaleMatrixBody {
  Out c;
  int64_t ld;
  float beta;
  template <int N>
  __device__ void Run(int64_t r, int64_t col) const {
    float v[N];
    if (beta == 0.0f) {
      for (int k = 0; k < N; ++k) v[k] = 0.0f;
    } else {
      LoadN<N>(c, r * ld + col, v);
      for (int k = 0; k < N; ++k) v[k] *= beta;
    }
    StoreN<N>(c, r * ld + col, v);
  }
};

// out (n, dim) [r] = table (V, dim) [ids[r]]
struct EmbeddingBody {
  const int32_t* ids;
  In table;
  Out out;
  int64_t dim;
  template <int N>
  __device__ void Run(int64_t r, int64_t c) const {
    float v[N];
    LoadN<N>(table, static_cast<int64_t>(ids[r]) * dim + c, v);
    StoreN<N>(out, r * dim + c, v);
  }
};

// cos, sin (n, half) [t, i] = RopeAngle(positions[t], inv_freq[i], scale)
struct RopeTablesBody {
  const int32_t* positions;
  const float* inv_freq;
  float scale;
  float *cos, *sin;
  int64_t half;
  template <int N>
  __device__ void Run(int64_t t, int64_t i) const {
    for (int k = 0; k < N; ++k) {
      RopeAngle(positions[t], inv_freq[i + k], scale, &cos[t * half + i + k],
                &sin[t * half + i + k]);
    }
  }
};

// x (n, heads, 2 * half): a "column" q < heads * half is the pair (i, i + half) of head
// q / half, i = q % half, rotated by cos/sin (n, half) [t, i]. Packs need half % kPack == 0,
// so a pack's pairs lie in one head.
struct RopeBody {
  Out x;
  const float *cos, *sin;
  int64_t heads, half;
  bool backward;
  template <int N>
  __device__ void Run(int64_t t, int64_t q) const {
    // heads * half is small (a token's pairs): 32-bit division.
    const int64_t h = static_cast<uint32_t>(q) / static_cast<uint32_t>(half);
    const int64_t i = q - h * half;
    const int64_t first = (t * heads + h) * 2 * half + i, second = first + half;
    float x1[N], x2[N], c[N], s[N];
    LoadN<N>(x, first, x1);
    LoadN<N>(x, second, x2);
    LoadN<N>(F32In(cos), t * half + i, c);
    LoadN<N>(F32In(sin), t * half + i, s);
    for (int k = 0; k < N; ++k) {
      const float a = x1[k], b = x2[k];
      if (backward) {  // the transpose: (d1 c + d2 s, d2 c - d1 s)
        x1[k] = a * c[k] + b * s[k];
        x2[k] = b * c[k] - a * s[k];
      } else {  // (x1 c - x2 s, x2 c + x1 s)
        x1[k] = a * c[k] - b * s[k];
        x2[k] = b * c[k] + a * s[k];
      }
    }
    StoreN<N>(x, first, x1);
    StoreN<N>(x, second, x2);
  }
};

}  // namespace

void Fill(Out dst, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  LaunchElementwise(FillBody{dst, value}, n, Aligned16({dst.ptr}), stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void Convert(In src, Out dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  if (src.dtype == dst.dtype) {  // a copy: the same bits
    if (src.ptr == dst.ptr) return;
    const size_t bytes = static_cast<size_t>(n) * (src.dtype == DType::kBF16 ? 2 : 4);
    AIR_CUDA_CHECK(cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  LaunchElementwise(ConvertBody{src, dst}, n, Aligned16({src.ptr, dst.ptr}), stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void AddInPlace(Out y, In x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  LaunchElementwise(AddBody{y, x}, n, Aligned16({y.ptr, x.ptr}), stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void AddBias(Out y, In bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const bool packed = cols % kPack == 0 && Aligned16({y.ptr, bias.ptr});
  LaunchRows(AddBiasBody{y, bias, cols}, rows, cols, packed, stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void Dropout(In x, float p, uint64_t seed, Out out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const float scale = 1.0f / (1.0f - p);  // the reference's fp32 reciprocal, once
  LaunchElementwise(DropoutBody{x, out, p, scale, seed}, n, Aligned16({x.ptr, out.ptr}), stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void DropoutMask(int64_t n, float p, uint64_t seed, uint8_t* bits, cudaStream_t stream) {
  if (n <= 0) return;
  LaunchElementwise(DropoutMaskBody{bits, n, p, seed}, (n + 7) / 8, false, stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void ApplyDropoutMask(In x, const uint8_t* bits, float p, bool accumulate, Out out, int64_t n,
                      cudaStream_t stream) {
  if (n <= 0) return;
  const float scale = 1.0f / (1.0f - p);  // the reference's fp32 reciprocal, once
  LaunchElementwise(ApplyDropoutMaskBody{x, bits, out, scale, accumulate}, n,
                    Aligned16({x.ptr, out.ptr}), stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void Scale(Out x, int64_t n, float factor, cudaStream_t stream) {
  if (n <= 0) return;
  LaunchElementwise(ScaleBody{x, factor}, n, Aligned16({x.ptr}), stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void ScaleMatrix(Out c, int64_t rows, int64_t cols, int64_t ld, float beta, cudaStream_t stream) {
  // beta == 1 leaves every value as it is (the reference's 0.0 + 1 * c: the same number).
  if (rows <= 0 || cols <= 0 || beta == 1.0f) return;
  const bool packed = cols % kPack == 0 && ld % kPack == 0 && Aligned16({c.ptr});
  LaunchRows(ScaleMatrixBody{c, ld, beta}, rows, cols, packed, stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void SwigluForward(In gate, In up, Out out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const bool packed = Aligned16({gate.ptr, up.ptr, out.ptr});
  LaunchElementwise(SwigluForwardBody{gate, up, out}, n, packed, stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void SwigluBackward(In gate, In up, In dout, Out dgate, Out dup, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const bool packed = Aligned16({gate.ptr, up.ptr, dout.ptr, dgate.ptr, dup.ptr});
  LaunchElementwise(SwigluBackwardBody{gate, up, dout, dgate, dup}, n, packed, stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void EmbeddingForward(const int32_t* ids, int64_t n, In table, int64_t dim, Out out,
                      cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return;
  const bool packed = dim % kPack == 0 && Aligned16({table.ptr, out.ptr});
  LaunchRows(EmbeddingBody{ids, table, out, dim}, n, dim, packed, stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void RopeTables(const int32_t* positions, int64_t n, const float* inv_freq, int64_t half,
                float scale, float* cos, float* sin, cudaStream_t stream) {
  if (n <= 0 || half <= 0) return;
  LaunchRows(RopeTablesBody{positions, inv_freq, scale, cos, sin, half}, n, half,
             /*packed=*/false, stream);
  AIR_CUDA_CHECK_LAUNCH();
}

void Rope(Out x, int64_t n, int64_t heads, int64_t head_dim, const float* cos, const float* sin,
          bool backward, cudaStream_t stream) {
  const int64_t half = head_dim / 2;
  if (n <= 0 || heads <= 0 || half <= 0) return;
  const bool packed = half % kPack == 0 && Aligned16({x.ptr, cos, sin});
  LaunchRows(RopeBody{x, cos, sin, heads, half, backward}, n, heads * half, packed, stream);
  AIR_CUDA_CHECK_LAUNCH();
}

}  // namespace air::engine::cuda
