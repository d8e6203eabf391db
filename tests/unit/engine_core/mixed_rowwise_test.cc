// FastOps' SwiGLU, residual add, RMSNorm and sum of squares convert BF16 in registers
// (mixed_rowwise.h, bf16_simd.h) where those kernels run; they must give the staged path's bits
// (widen into fp32, compute, round once). Each op on every dtype pattern it takes equals, bit for
// bit, the same op on F32 arrays holding the widened values with its BF16 outputs rounded once —
// lengths whose tails are not a multiple of 16, one and three threads; the kernels on special
// values (NaN, infinities, signed zeros, denormals, rounding ties, overflow); and RMSNorm's
// forward against FastOps' scalar loop (its sum of squares' order). ctest runs this binary at
// every kernel level: below AVX-512 the ops stage, and the same comparisons hold.
#include "engine/backend/cpu/mixed_rowwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/backend/cpu/fast_ops.h"
#include "engine/dtype.h"
#include "engine/ops/ops.h"
#include "op_test_util.h"

namespace air::engine {
namespace {

using testing::DeviceArrays;
using testing::RoundedTo;

uint32_t Bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (Bits(got[i]) != Bits(want[i])) {
      ADD_FAILURE() << what << ": element " << i << " of " << got.size() << " is " << got[i]
                    << " (0x" << std::hex << Bits(got[i]) << "), want " << want[i] << " (0x"
                    << Bits(want[i]) << std::dec << ")";
      return;
    }
  }
}

// Values of a few magnitudes, not rounded.
std::vector<float> Wave(size_t n, float phase, float scale = 1.0f) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const float t = 0.731f * static_cast<float>(i) + phase;
    out[i] = scale * std::sin(t) * (1.0f + 0.37f * std::cos(3.1f * t)) * 2.5f;
  }
  return out;
}

DType Pick(int pattern, int bit) { return (pattern >> bit) & 1 ? DType::kBF16 : DType::kF32; }

std::string Name(std::initializer_list<DType> dtypes) {
  std::string name;
  for (DType d : dtypes) name += d == DType::kBF16 ? "b" : "f";
  return name;
}

// Lengths with every kind of tail, one longer than a chunk of the elementwise ops (4096) and one
// that three threads split.
const std::vector<int64_t> kLengths = {1, 15, 16, 17, 100, 4096 + 37, 3 * 16384 + 5};

TEST(MixedRowwise, SwigluMatchesTheStagedBitsOnEveryDtypePattern) {
  for (int threads : {1, 3}) {
    const FastOps ops(threads);
    for (int64_t n : kLengths) {
      const auto size = static_cast<size_t>(n);
      const std::vector<float> gate = Wave(size, 0.1f, 3.0f), up = Wave(size, 1.3f);
      const std::vector<float> dout = Wave(size, 2.2f), dgate = Wave(size, 0.7f, 0.5f);
      const std::vector<float> dup = Wave(size, 1.9f, 0.5f);
      for (int p = 0; p < 32; ++p) {
        DeviceArrays a(ops);
        const DType tg = Pick(p, 0), tu = Pick(p, 1), td = Pick(p, 2), tdg = Pick(p, 3),
                    tdu = Pick(p, 4);
        const std::string what = "n " + std::to_string(n) + ", " + std::to_string(threads) +
                                 " threads, " + Name({tg, tu, td, tdg, tdu});
        // Forward: gate, up, out (the pattern's first three bits).
        const View g = a.Data(gate, tg), u = a.Data(up, tu), out = a.Data(dout, td);
        const View g32 = a.F32(RoundedTo(gate, tg)), u32 = a.F32(RoundedTo(up, tu));
        const View out32 = a.F32(dout);
        ops.SwigluForward(g, u, out);
        ops.SwigluForward(g32, u32, out32);
        ExpectSameBits(a.Get(out), RoundedTo(a.Get(out32), td), "SwigluForward " + what);
        // Backward: gate, up, dout, dgate, dup.
        const View d = a.Data(dout, td), dg = a.Data(dgate, tdg), du = a.Data(dup, tdu);
        const View d32 = a.F32(RoundedTo(dout, td)), dg32 = a.F32(RoundedTo(dgate, tdg));
        const View du32 = a.F32(RoundedTo(dup, tdu));
        ops.SwigluBackward(g, u, d, dg, du);
        ops.SwigluBackward(g32, u32, d32, dg32, du32);
        ExpectSameBits(a.Get(dg), RoundedTo(a.Get(dg32), tdg), "SwigluBackward dgate " + what);
        ExpectSameBits(a.Get(du), RoundedTo(a.Get(du32), tdu), "SwigluBackward dup " + what);
      }
    }
  }
}

TEST(MixedRowwise, AddInPlaceMatchesTheStagedBitsOnEveryDtypePattern) {
  for (int threads : {1, 3}) {
    const FastOps ops(threads);
    for (int64_t n : kLengths) {
      const std::vector<float> y = Wave(static_cast<size_t>(n), 0.4f, 7.0f);
      const std::vector<float> x = Wave(static_cast<size_t>(n), 2.9f, 0.01f);
      for (int p = 0; p < 4; ++p) {
        DeviceArrays a(ops);
        const DType ty = Pick(p, 0), tx = Pick(p, 1);
        const View yv = a.Data(y, ty), xv = a.Data(x, tx);
        const View y32 = a.F32(RoundedTo(y, ty)), x32 = a.F32(RoundedTo(x, tx));
        ops.AddInPlace(yv, xv);
        ops.AddInPlace(y32, x32);
        ExpectSameBits(a.Get(yv), RoundedTo(a.Get(y32), ty),
                       "AddInPlace n " + std::to_string(n) + ", " + std::to_string(threads) +
                           " threads, " + Name({ty, tx}));
      }
    }
  }
}

TEST(MixedRowwise, SumOfSquaresOfBf16IsTheSumOfTheWidenedValues) {
  for (int threads : {1, 3}) {
    const FastOps ops(threads);
    for (int64_t n : {int64_t{1}, int64_t{63}, int64_t{64 + 17}, int64_t{3 * 32768 + 101}}) {
      const std::vector<float> x = Wave(static_cast<size_t>(n), 0.8f, 3.0f);
      DeviceArrays a(ops);
      const View sum = a.F64(0.25), sum32 = a.F64(0.25);
      ops.SumOfSquares(a.Data(x, DType::kBF16), sum);
      ops.SumOfSquares(a.F32(RoundedTo(x, DType::kBF16)), sum32);
      const double got = a.Scalar(sum), want = a.Scalar(sum32);
      EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0)
          << "n " << n << ", " << threads << " threads: " << got << " vs " << want;
    }
  }
}

// FastOps' staged RMSNorm forward row (fast_ops.cc): eight fp32 partial sums of squares over the
// whole groups of eight, added in double in lane order, the rest in double.
float ScalarInv(const float* x, int64_t dim, float eps) {
  float partial[8] = {};
  int64_t c = 0;
  for (; c + 8 <= dim; c += 8) {
    for (int u = 0; u < 8; ++u) partial[u] += x[c + u] * x[c + u];
  }
  double sum_sq = 0.0;
  for (float p : partial) sum_sq += p;
  for (; c < dim; ++c) sum_sq += static_cast<double>(x[c]) * x[c];
  return static_cast<float>(1.0 / std::sqrt(sum_sq / dim + eps));
}

TEST(MixedRowwise, RmsNormMatchesTheStagedBitsOnEveryDtypePattern) {
  const float eps = 1e-5f;
  for (int threads : {1, 3}) {
    const FastOps ops(threads);
    for (int64_t dim : {1, 7, 8, 9, 23, 29, 100, 515}) {
      const int64_t rows = 37;
      const auto size = static_cast<size_t>(rows * dim);
      const std::vector<float> x = Wave(size, 0.3f, 2.0f), dy = Wave(size, 1.7f);
      const std::vector<float> dx = Wave(size, 0.9f, 0.25f);
      const std::vector<float> w = Wave(static_cast<size_t>(dim), 2.4f);
      const std::vector<float> dw = Wave(static_cast<size_t>(dim), 0.6f);
      // x, w, y / dy, dx, dw: six bits.
      for (int p = 0; p < 64; ++p) {
        DeviceArrays a(ops);
        const DType tx = Pick(p, 0), tw = Pick(p, 1), ty = Pick(p, 2), tdy = Pick(p, 3),
                    tdx = Pick(p, 4), tdw = Pick(p, 5);
        const std::string what = "dim " + std::to_string(dim) + ", " + std::to_string(threads) +
                                 " threads, " + Name({tx, tw, ty, tdy, tdx, tdw});
        const View xv = a.Data(x, tx), wv = a.Data(w, tw), y = a.Data(dx, ty);
        const View rstd = a.F32(std::vector<float>(static_cast<size_t>(rows)));
        const std::vector<float> x_in = RoundedTo(x, tx), w_in = RoundedTo(w, tw);
        const View x32 = a.F32(x_in), w32 = a.F32(w_in), y32 = a.F32(dx);
        const View rstd32 = a.F32(std::vector<float>(static_cast<size_t>(rows)));
        ops.RmsNormForward(xv, wv, eps, y, rstd);
        ops.RmsNormForward(x32, w32, eps, y32, rstd32);
        ExpectSameBits(a.Get(y), RoundedTo(a.Get(y32), ty), "RmsNormForward y " + what);
        ExpectSameBits(a.Get(rstd), a.Get(rstd32), "RmsNormForward rstd " + what);
        if (p == 0) {  // all F32: the staged scalar loop's bits
          std::vector<float> want_rstd(static_cast<size_t>(rows)), want_y(size);
          for (int64_t r = 0; r < rows; ++r) {
            const float inv = ScalarInv(x_in.data() + r * dim, dim, eps);
            want_rstd[static_cast<size_t>(r)] = inv;
            for (int64_t c = 0; c < dim; ++c) {
              want_y[static_cast<size_t>(r * dim + c)] = w_in[c] * (x_in[r * dim + c] * inv);
            }
          }
          ExpectSameBits(a.Get(rstd32), want_rstd, "RmsNormForward rstd, scalar loop " + what);
          ExpectSameBits(a.Get(y32), want_y, "RmsNormForward y, scalar loop " + what);
        }
        const View dyv = a.Data(dy, tdy), dxv = a.Data(dx, tdx), dwv = a.Data(dw, tdw);
        const View dy32 = a.F32(RoundedTo(dy, tdy)), dx32 = a.F32(RoundedTo(dx, tdx));
        const View dw32 = a.F32(RoundedTo(dw, tdw));
        ops.RmsNormBackward(xv, wv, rstd, dyv, dxv, dwv);
        ops.RmsNormBackward(x32, w32, rstd32, dy32, dx32, dw32);
        ExpectSameBits(a.Get(dxv), RoundedTo(a.Get(dx32), tdx), "RmsNormBackward dx " + what);
        ExpectSameBits(a.Get(dwv), RoundedTo(a.Get(dw32), tdw), "RmsNormBackward dw " + what);
        const View dx_again = a.F32(a.Get(dxv));  // dx as rounded, accumulated once more
        ops.RmsNormBackward(xv, wv, rstd, dyv, dxv, View());  // a frozen weight
        ops.RmsNormBackward(x32, w32, rstd32, dy32, dx_again, View());
        ExpectSameBits(a.Get(dxv), RoundedTo(a.Get(dx_again), tdx),
                       "RmsNormBackward, no dw " + what);
      }
    }
  }
}

// Host arrays as the kernels' arrays.
Bf16OrF32 F32(std::vector<float>& v) { return {v.data(), false}; }
Bf16OrF32 B16(std::vector<uint16_t>& v) { return {v.data(), true}; }
std::vector<uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = F32ToBf16(v[i]);
  return out;
}
std::vector<float> Widened(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = Bf16ToF32(v[i]);
  return out;
}
std::vector<float> Rounded(const std::vector<float>& v) { return Widened(ToBf16(v)); }

// fp32 values every rounding case meets: NaN (quiet and signalling), infinities, signed zeros,
// denormals (which vcvtneps2bf16 alone would flush), ties to even both ways, values that round
// up to infinity, and ordinary ones; repeated with a shift so they fall in every lane and tail.
std::vector<float> Specials(size_t n) {
  const uint32_t bits[] = {0x7fc00000u, 0x7f800001u, 0xffa00000u, 0x7f800000u, 0xff800000u,
                           0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00400000u,
                           0x00008000u, 0x00018000u, 0x3f808000u, 0x3f818000u, 0xbf808000u,
                           0x7f7fffffu, 0xff7fffffu, 0x3f800001u, 0x3f80ffffu, 0x00800000u};
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t b = bits[(i * 7 + i / 20) % (sizeof bits / sizeof bits[0])];
    std::memcpy(&out[i], &b, sizeof b);
  }
  return out;
}

TEST(MixedRowwise, KernelsRoundSpecialValuesAsTheScalarConversion) {
  if (!MixedRowwiseRuns()) GTEST_SKIP() << "the kernels need AVX-512 (BW, VL) at this level";
  for (size_t n : {1u, 5u, 16u, 19u, 64u, 333u}) {
    // y (BF16) += x (F32): round(widen(y) + x), every special through the store's rounding.
    const std::vector<float> x = Specials(n);
    std::vector<float> y0 = Wave(n, 0.2f, 1e-3f);
    for (size_t i = 0; i < n; i += 3) y0[i] = 0.0f;  // y 0: the sum is x itself
    std::vector<uint16_t> y = ToBf16(y0);
    std::vector<float> want = Widened(y), xs = x;
    for (size_t i = 0; i < n; ++i) want[i] += x[i];
    AddMixed(B16(y), F32(xs), static_cast<int64_t>(n));
    ExpectSameBits(Widened(y), Rounded(want), "AddMixed n " + std::to_string(n));
    // SwiGLU with special gates and ups, out BF16, against the F32 kernel rounded.
    std::vector<float> gate = Specials(n), up = Wave(n, 0.5f), out32(n);
    std::vector<uint16_t> out(n);
    SwigluForwardMixed(F32(gate), F32(up), static_cast<int64_t>(n), B16(out));
    SwigluForwardMixed(F32(gate), F32(up), static_cast<int64_t>(n), F32(out32));
    ExpectSameBits(Widened(out), Rounded(out32), "SwigluForwardMixed n " + std::to_string(n));
  }
}

}  // namespace
}  // namespace air::engine
