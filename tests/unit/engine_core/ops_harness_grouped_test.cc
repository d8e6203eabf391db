// The per-op harness (ops_harness_test.cc) for the experts' grouped GEMM and MXFP4 dequantisation:
// every backend and precision against the fp32 reference on the same inputs, the row groups read
// from offsets in the backend's own memory (as MoeDispatch leaves them). The groups are ragged —
// empty ones, one row, several 64-row tiles, rows before the first group and after the last that
// must stay untouched — in both weight layouts, with and without a bias, overwriting (beta 0,
// over NaN) and accumulating (beta 1), in the dtype patterns of the model's forward (x @ W), its
// input gradient (dy @ W^T: an F32 gradient times a BF16 weight in bf16_f32grad) and its weight
// gradient. MXFP4 must give the reference decoder's bits on every backend, every scale value
// (subnormals and infinities included) and every byte.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/mxfp4_decode.h"
#include "ops_harness.h"

namespace air::engine {
namespace {

using testing::OpsHarness;
using testing::Pair;
using testing::RandomVector;
using testing::RoundedTo;
using testing::Sides;

struct GroupedCase {
  std::vector<int32_t> offsets;  // G + 1
  int64_t rows, n, k;            // M >= offsets[G]
};

std::vector<GroupedCase> GroupedCases() {
  return {
      {{2, 5, 5, 75, 76}, 81, 67, 40},  // unused rows around, an empty group
      {{0, 64, 129, 129, 130, 260, 267, 267, 300}, 300, 130, 70},  // tiles and ragged tails
      {{0, 200}, 200, 33, 300},                                    // one group, K over many slices
      {{0, 0, 0, 0}, 10, 16, 32},  // no rows at all: nothing changes
  };
}

std::string Describe(const GroupedCase& c) {
  return "G" + std::to_string(c.offsets.size() - 1) + " M" + std::to_string(c.rows) + " N" +
         std::to_string(c.n) + " K" + std::to_string(c.k);
}

TEST_P(OpsHarness, GroupedGemmEveryLayoutBiasAndBeta) {
  if (!Runs(OpKind::kGroupedGemm)) return;
  const auto& p = precision();
  // The forward (x, w, y in the precision's dtypes) and the input gradient's pattern (x = dy and
  // y = dx in the gradient dtype), as ops_harness_test.cc's GEMM test.
  const DType x_dtype = p.grad, w_dtype = p.in, y_dtype = p.name == "bf16" ? p.out : p.grad;
  const bool bf16_product = x_dtype == DType::kBF16 || w_dtype == DType::kBF16;
  const DType round = bf16_product ? DType::kBF16 : DType::kF32;  // ops.h's rule, both operands
  for (const GroupedCase& c : GroupedCases()) {
    const int64_t groups = static_cast<int64_t>(c.offsets.size()) - 1;
    for (bool trans_w : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        for (bool with_bias : {false, true}) {
          auto x = RoundedTo(RandomVector(static_cast<size_t>(c.rows * c.k), 80), round);
          auto w = RoundedTo(RandomVector(static_cast<size_t>(groups * c.k * c.n), 81), round);
          auto bias = RoundedTo(RandomVector(static_cast<size_t>(groups * c.n), 82), w_dtype);
          auto y0 = RoundedTo(RandomVector(static_cast<size_t>(c.rows * c.n), 83), y_dtype);
          if (beta == 0.0f) {  // beta 0 ignores the grouped rows' y, NaN too
            for (int64_t i = c.offsets.front() * c.n; i < c.offsets.back() * c.n; ++i) {
              y0[static_cast<size_t>(i)] = NAN;
            }
          }
          Sides d(*backend_, ref_);
          const Pair off = d.I32(c.offsets), xv = d.Data(x, x_dtype, {c.rows, c.k});
          const Pair wv = d.Data(w, w_dtype), bv = with_bias ? d.Data(bias, w_dtype) : Pair{};
          const Pair y = d.Data(y0, y_dtype, {c.rows, c.n});
          backend_->GroupedGemm(trans_w, c.n, c.k, xv.got, wv.got, bv.got, off.got, beta, y.got);
          ref_.GroupedGemm(trans_w, c.n, c.k, xv.want, wv.want, bv.want, off.want, beta, y.want);
          const std::string what = Describe(c) + (trans_w ? " w^T" : " w") +
                                   " beta=" + std::to_string(beta) + (with_bias ? " bias" : "");
          Expect("gemm/sqrt(k)", d.Error(y) / std::sqrt(double(c.k)), tol().gemm_per_sqrt_k, what);
          // Rows outside every group keep their values exactly.
          const auto got = d.Got(y);
          for (int64_t r = 0; r < c.rows; ++r) {
            if (r >= c.offsets.front() && r < c.offsets.back()) continue;
            for (int64_t j = 0; j < c.n; ++j) {
              ASSERT_EQ(got[r * c.n + j], y0[r * c.n + j]) << what << " row " << r;
            }
          }
        }
      }
    }
  }
}

TEST_P(OpsHarness, GroupedGemmWeightGradAccumulatesPerGroup) {
  if (!Runs(OpKind::kGroupedGemmWeightGrad)) return;
  const auto& p = precision();
  // dW (master, the gradient dtype) += x^T dy with x an activation and dy a gradient.
  const DType x_dtype = p.in, dy_dtype = p.grad, dw_dtype = p.grad;
  const DType round =
      x_dtype == DType::kBF16 || dy_dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  for (const GroupedCase& c : GroupedCases()) {
    const int64_t groups = static_cast<int64_t>(c.offsets.size()) - 1;
    for (int parts = 0; parts < 3; ++parts) {  // both, only dw, only dbias
      auto x = RoundedTo(RandomVector(static_cast<size_t>(c.rows * c.k), 84), round);
      auto dy = RoundedTo(RandomVector(static_cast<size_t>(c.rows * c.n), 85), round);
      auto dw0 = RoundedTo(RandomVector(static_cast<size_t>(groups * c.k * c.n), 86), dw_dtype);
      auto db0 = RoundedTo(RandomVector(static_cast<size_t>(groups * c.n), 87), dw_dtype);
      Sides d(*backend_, ref_);
      const Pair off = d.I32(c.offsets), xv = d.Data(x, x_dtype, {c.rows, c.k});
      const Pair dyv = d.Data(dy, dy_dtype, {c.rows, c.n});
      const Pair dw = parts != 2 ? d.Data(dw0, dw_dtype) : Pair{};
      const Pair db = parts != 1 ? d.Data(db0, dw_dtype) : Pair{};
      backend_->GroupedGemmWeightGrad(c.k, c.n, xv.got, dyv.got, off.got, dw.got, db.got);
      ref_.GroupedGemmWeightGrad(c.k, c.n, xv.want, dyv.want, off.want, dw.want, db.want);
      const std::string what = Describe(c) + " parts " + std::to_string(parts);
      if (parts != 2) {
        Expect("gemm/sqrt(k)", d.Error(dw) / std::sqrt(double(c.rows)), tol().gemm_per_sqrt_k,
               what + " dw");
      }
      if (parts != 1) {
        // As BiasBackward: an F32 sum differs by its order, a BF16 one by a rounding.
        if (dw_dtype == DType::kF32) {
          Expect("reduction", d.Error(db), tol().reduction_relative, what + " dbias");
        } else {
          Expect("elementwise", d.Error(db), tol().elementwise, what + " dbias (bf16)");
        }
      }
      // A group with no rows adds nothing to its gradients.
      for (int64_t g = 0; g < groups; ++g) {
        if (c.offsets[g] != c.offsets[g + 1]) continue;
        if (parts != 2) {
          const auto got = d.Got(dw);
          for (int64_t i = 0; i < c.k * c.n; ++i) {
            ASSERT_EQ(got[g * c.k * c.n + i], dw0[g * c.k * c.n + i]) << what << " group " << g;
          }
        }
        if (parts != 1) {
          const auto got = d.Got(db);
          for (int64_t j = 0; j < c.n; ++j) ASSERT_EQ(got[g * c.n + j], db0[g * c.n + j]) << what;
        }
      }
    }
  }
}

TEST_P(OpsHarness, DequantizeMxfp4GivesTheDecodersBits) {
  if (!Runs(OpKind::kDequantizeMxfp4)) return;
  const DType out_dtype = precision().in;
  // Every scale (0..255: subnormal, normal and infinite results) and every byte.
  for (auto [experts, rows, groups] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{3, 5, 2}, {2, 67, 3}, {1, 256, 1}}) {
    const int64_t scale_count = experts * rows * groups;
    std::vector<uint8_t> blocks(static_cast<size_t>(scale_count * kMxfp4GroupBytes));
    std::vector<uint8_t> scales(static_cast<size_t>(scale_count));
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<uint8_t>(i * 37 + 11);
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(i * 53 + 7);
    const Mxfp4Layout layout{experts, rows, groups};
    std::vector<float> want(static_cast<size_t>(layout.numel()));
    DequantizeMxfp4F32(layout, blocks.data(), scales.data(), Mxfp4Orientation::kTransformers, 0,
                       experts, want.data());
    Sides d(*backend_, ref_);
    const Pair b = d.U8(blocks), s = d.U8(scales);
    const Pair out = d.Data(std::vector<float>(want.size(), NAN), out_dtype);
    backend_->DequantizeMxfp4(experts, rows, groups, b.got, s.got, out.got);
    const auto got = d.Got(out);
    for (size_t i = 0; i < want.size(); ++i) {
      // Bits, not values: -0 must stay -0.
      uint32_t got_bits, want_bits;
      std::memcpy(&got_bits, &got[i], 4);
      std::memcpy(&want_bits, &want[i], 4);
      ASSERT_EQ(got_bits, want_bits) << "E" << experts << " R" << rows << " G" << groups
                                     << " element " << i << " in " << DTypeName(out_dtype);
    }
  }
}

}  // namespace
}  // namespace air::engine
