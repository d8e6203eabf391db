// The per-op harness (ops_harness_test.cc) for LoRA's ops: the kept dropout mask (DropoutMask)
// and its application (ApplyDropoutMask), the two products that take the dropped input or the
// input gradient through it (GemmDropped, GemmAddDropped; both in one pass:
// DroppedLinearBackward), and the base product with the branch's added in the same pass
// (GemmConcatK): every backend and precision against the fp32 reference, and each dropout op bit
// for bit against its definition (ApplyDropoutMask and Gemm) on the same backend.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ops_harness.h"

namespace air::engine {
namespace {

using testing::DeviceArrays;
using testing::OpsHarness;
using testing::Pair;
using testing::Precision;
using testing::RandomVector;
using testing::RoundedTo;
using testing::ScaledMaxDiff;
using testing::Sides;

TEST_P(OpsHarness, DropoutMaskKeptAndAppliedIsDropoutBitForBit) {
  if (!Runs(OpKind::kDropoutMask) || !Runs(OpKind::kApplyDropoutMask)) return;
  const Precision& p = precision();
  for (int64_t n : {int64_t{1}, int64_t{13}, int64_t{70001}}) {  // a partial byte; many chunks
    auto x = In(static_cast<size_t>(n), 47), acc0 = Grad(static_cast<size_t>(n), 48);
    const size_t bytes = static_cast<size_t>((n + 7) / 8);
    for (float prob : {0.0f, 0.05f, 0.5f}) {
      const std::string what = "n=" + std::to_string(n) + " p=" + std::to_string(prob);
      Sides d(*backend_, ref_);
      // 0xA5: every byte written, the bits past n cleared.
      const Pair bits = d.U8(std::vector<uint8_t>(bytes, 0xA5));
      backend_->DropoutMask(n, prob, 1234, bits.got);
      ref_.DropoutMask(n, prob, 1234, bits.want);
      const std::vector<uint8_t> got_bits = d.GotBytes(bits), want_bits = d.WantBytes(bits);
      ASSERT_EQ(got_bits, want_bits) << what;
      // beta 0: Dropout's values (the same backend, the same seed), in place too.
      const Pair xv = d.Data(x, p.in), out = d.Data(std::vector<float>(n), p.out);
      const Pair drawn = d.Data(std::vector<float>(n), p.out);
      backend_->ApplyDropoutMask(xv.got, bits.got, prob, 0.0f, out.got);
      ref_.ApplyDropoutMask(xv.want, bits.want, prob, 0.0f, out.want);
      backend_->Dropout(xv.got, prob, 1234, drawn.got);
      EXPECT_EQ(d.Got(out), d.Got(drawn)) << what;
      Expect("elementwise", ScaledMaxDiff(d.Got(out), d.Want(out)), tol().elementwise, what);
      DeviceArrays t(*backend_);
      const View inplace = t.Data(x, p.in);
      backend_->ApplyDropoutMask(inplace, bits.got, prob, 0.0f, inplace);
      EXPECT_EQ(t.Get(inplace), RoundedTo(d.Got(out), p.in)) << what;
      // beta 1: the masked gradient added into an accumulator (LoRA's input gradient).
      const Pair gv = d.Data(x, p.grad), acc = d.Data(acc0, p.grad);
      backend_->ApplyDropoutMask(gv.got, bits.got, prob, 1.0f, acc.got);
      ref_.ApplyDropoutMask(gv.want, bits.want, prob, 1.0f, acc.want);
      Expect("elementwise", ScaledMaxDiff(d.Got(acc), d.Want(acc)), tol().elementwise, what);
    }
  }
}

// GemmDropped (LoRA's dropped input in its products): against the reference's, and bit for bit
// its definition on the same backend (ApplyDropoutMask into scratch, then Gemm), whichever
// operand is dropped, every transpose, beta 0 and 1. p = 0.5: the scale 2 is exact in bf16, so
// the reference's fp32 operand and the backend's bf16 one hold the same values.
TEST_P(OpsHarness, GemmDroppedIsApplyDropoutMaskThenGemm) {
  if (!Runs(OpKind::kGemmDropped) || !Runs(OpKind::kGemm)) return;
  const Precision& p = precision();
  const DType a_dtype = p.grad, b_dtype = p.in, c_dtype = p.name == "bf16" ? p.out : p.grad;
  const DType round =
      a_dtype == DType::kBF16 || b_dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  const float prob = 0.5f;
  uint64_t seed = 60;
  for (auto [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {5, 7, 9}, {33, 40, 17}, {130, 16, 64}, {64, 300, 16}}) {
    for (int drop_b = 0; drop_b < 2; ++drop_b) {
      for (int ta = 0; ta < 2; ++ta) {
        for (int tb = 0; tb < 2; ++tb) {
          for (float beta : {0.0f, 1.0f}) {
            const int64_t lda = ta ? m : k, ldb = tb ? k : n, elements = drop_b ? k * n : m * k;
            auto a = RoundedTo(RandomVector(static_cast<size_t>(m * k), seed += 3), round);
            auto b = RoundedTo(RandomVector(static_cast<size_t>(k * n), seed + 1), round);
            auto c0 = RoundedTo(RandomVector(static_cast<size_t>(m * n), seed + 2), c_dtype);
            std::vector<uint8_t> mask(static_cast<size_t>((elements + 7) / 8));
            std::mt19937 rng(static_cast<uint32_t>(seed));
            for (uint8_t& byte : mask) byte = static_cast<uint8_t>(rng());
            const DType dropped_dtype = drop_b ? b_dtype : a_dtype;
            Sides d(*backend_, ref_);
            const Pair av = d.Data(a, a_dtype), bv = d.Data(b, b_dtype), c = d.Data(c0, c_dtype);
            const Pair bits = d.U8(mask);
            const Pair scratch =
                d.Data(std::vector<float>(static_cast<size_t>(elements)), dropped_dtype);
            backend_->GemmDropped(drop_b, ta, tb, m, n, k, av.got, lda, bv.got, ldb, beta, c.got, n,
                                  bits.got, prob, scratch.got);
            ref_.GemmDropped(drop_b, ta, tb, m, n, k, av.want, lda, bv.want, ldb, beta, c.want, n,
                             bits.want, prob, scratch.want);
            const std::string what =
                "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                " drop_b=" + std::to_string(drop_b) + " ta=" + std::to_string(ta) +
                " tb=" + std::to_string(tb) + " beta=" + std::to_string(beta);
            Expect("gemm/sqrt(k)", d.Error(c) / std::sqrt(double(k)), tol().gemm_per_sqrt_k, what);
            // The definition on the same backend: the same bits.
            DeviceArrays t(*backend_);
            const View dropped =
                t.Data(std::vector<float>(static_cast<size_t>(elements)), dropped_dtype);
            const View c2 = t.Data(c0, c_dtype);
            backend_->ApplyDropoutMask(drop_b ? bv.got : av.got, bits.got, prob, 0.0f, dropped);
            backend_->Gemm(ta, tb, m, n, k, drop_b ? av.got : dropped, lda,
                           drop_b ? dropped : bv.got, ldb, beta, c2, n);
            EXPECT_EQ(d.Got(c), t.Get(c2)) << what;
          }
        }
      }
    }
  }
}

// GemmAddDropped (LoRA's input gradient, dx += dropout'(du A)): against the reference's, and bit
// for bit its definition on the same backend (Gemm into scratch, then ApplyDropoutMask
// accumulating it), every transpose; the output in the precision's gradient dtype.
TEST_P(OpsHarness, GemmAddDroppedIsGemmThenApplyDropoutMask) {
  if (!Runs(OpKind::kGemmAddDropped) || !Runs(OpKind::kGemm)) return;
  const Precision& p = precision();
  const DType a_dtype = p.grad, b_dtype = p.in, c_dtype = p.grad;
  const DType round =
      a_dtype == DType::kBF16 || b_dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  const float prob = 0.5f;
  uint64_t seed = 90;
  for (auto [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {5, 7, 9}, {33, 40, 17}, {130, 300, 16}, {64, 16, 130}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        const int64_t lda = ta ? m : k, ldb = tb ? k : n;
        auto a = RoundedTo(RandomVector(static_cast<size_t>(m * k), seed += 3), round);
        auto b = RoundedTo(RandomVector(static_cast<size_t>(k * n), seed + 1), round);
        auto c0 = RoundedTo(RandomVector(static_cast<size_t>(m * n), seed + 2), c_dtype);
        std::vector<uint8_t> mask(static_cast<size_t>((m * n + 7) / 8));
        std::mt19937 rng(static_cast<uint32_t>(seed));
        for (uint8_t& byte : mask) byte = static_cast<uint8_t>(rng());
        Sides d(*backend_, ref_);
        const Pair av = d.Data(a, a_dtype), bv = d.Data(b, b_dtype), c = d.Data(c0, c_dtype);
        const Pair bits = d.U8(mask);
        const Pair scratch = d.F32(std::vector<float>(static_cast<size_t>(m * n)));
        backend_->GemmAddDropped(ta, tb, m, n, k, av.got, lda, bv.got, ldb, c.got, bits.got, prob,
                                 scratch.got);
        ref_.GemmAddDropped(ta, tb, m, n, k, av.want, lda, bv.want, ldb, c.want, bits.want, prob,
                            scratch.want);
        const std::string what = "m=" + std::to_string(m) + " n=" + std::to_string(n) +
                                 " k=" + std::to_string(k) + " ta=" + std::to_string(ta) +
                                 " tb=" + std::to_string(tb);
        Expect("gemm/sqrt(k)", d.Error(c) / std::sqrt(double(k)), tol().gemm_per_sqrt_k, what);
        DeviceArrays t(*backend_);
        const View product = t.F32(std::vector<float>(static_cast<size_t>(m * n)));
        const View c2 = t.Data(c0, c_dtype);
        backend_->Gemm(ta, tb, m, n, k, av.got, lda, bv.got, ldb, 0.0f, product, n);
        backend_->ApplyDropoutMask(product, bits.got, prob, 1.0f, c2);
        EXPECT_EQ(d.Got(c), t.Get(c2)) << what;
      }
    }
  }
}

// GemmConcatK (LoRA's y = x W^T + u B^T): against the reference's, both transposes of B, a C as
// the Gemm test's (bf16: the output dtype; bf16_f32grad: F32, as LoRA's o and down projections
// write); A and A2 in the input dtype (fused where the backend can), or F32 (its definition); a
// scratch of one row (the definition's row blocks) or of the whole C.
TEST_P(OpsHarness, GemmConcatKIsBothProductsSummed) {
  if (!Runs(OpKind::kGemmConcatK)) return;
  const Precision& p = precision();
  const DType c_dtype = p.name == "bf16" ? p.out : p.grad;
  uint64_t seed = 120;
  for (auto [m, n, k, k2] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {5, 7, 9, 3}, {33, 40, 17, 16}, {130, 300, 64, 16}}) {
    for (int tb = 0; tb < 2; ++tb) {
      for (DType a_dtype : {p.in, DType::kF32}) {
        for (int64_t scratch_rows : {int64_t{1}, m}) {
          const int64_t ldb = tb ? k : n, ldb2 = tb ? k2 : n;
          const DType round = p.in == DType::kBF16 ? DType::kBF16 : DType::kF32;
          auto a = RoundedTo(RandomVector(static_cast<size_t>(m * k), seed += 5), round);
          auto a2 = RoundedTo(RandomVector(static_cast<size_t>(m * k2), seed + 1), round);
          auto b = RoundedTo(RandomVector(static_cast<size_t>(k * n), seed + 2), round);
          auto b2 = RoundedTo(RandomVector(static_cast<size_t>(k2 * n), seed + 3), round);
          Sides d(*backend_, ref_);
          const Pair av = d.Data(a, a_dtype), a2v = d.Data(a2, a_dtype);
          const Pair bv = d.Data(b, p.in), b2v = d.F32(b2);
          const Pair c = d.Data(std::vector<float>(static_cast<size_t>(m * n), 7.0f), c_dtype);
          const Pair scratch = d.F32(std::vector<float>(static_cast<size_t>(scratch_rows * n)));
          backend_->GemmConcatK(tb, m, n, k, av.got, k, bv.got, ldb, k2, a2v.got, k2, b2v.got, ldb2,
                                c.got, scratch.got);
          ref_.GemmConcatK(tb, m, n, k, av.want, k, bv.want, ldb, k2, a2v.want, k2, b2v.want, ldb2,
                           c.want, scratch.want);
          const std::string what = "m=" + std::to_string(m) + " n=" + std::to_string(n) +
                                   " k=" + std::to_string(k) + " k2=" + std::to_string(k2) +
                                   " tb=" + std::to_string(tb) + " a " + DTypeName(a_dtype) +
                                   " scratch rows " + std::to_string(scratch_rows);
          Expect("gemm/sqrt(k)", d.Error(c) / std::sqrt(double(k + k2)), tol().gemm_per_sqrt_k,
                 what);
        }
      }
    }
  }
}

// DroppedLinearBackward (LoRA's A backward: dA = du^T drop(x), dx += drop'(du A)): against the
// reference's (p = 0.5, whose scale is exact), and bit for bit its definition on the same backend
// (ApplyDropoutMask and Gemm for the weight gradient, Gemm and ApplyDropoutMask accumulating for
// the input gradient): ranks 1 to 16 (an odd one pads a step), an odd N, a weight gradient over
// two K slices (N 2501), columns past a 16-lane vector, beta 0 and 1, dy F32 (LoRA's du) or in the
// gradient dtype, dx in the gradient dtype or absent, p = 0.05 too.
TEST_P(OpsHarness, DroppedLinearBackwardIsGemmDroppedThenGemmAddDropped) {
  if (!Runs(OpKind::kDroppedLinearBackward) || !Runs(OpKind::kGemm)) return;
  const Precision& p = precision();
  const DType round = p.in == DType::kBF16 ? DType::kBF16 : DType::kF32;
  uint64_t seed = 150;
  for (auto [n, r, in] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {5, 3, 7}, {33, 16, 40}, {130, 16, 300}, {2501, 5, 37}, {64, 1, 16}}) {
    for (DType dy_dtype : {DType::kF32, p.grad}) {
      for (int with_dx = 0; with_dx < 2; ++with_dx) {
        for (float beta : {0.0f, 1.0f}) {
          for (float prob : {0.5f, 0.05f}) {
            const auto size = [](int64_t elements) { return static_cast<size_t>(elements); };
            auto x = RoundedTo(RandomVector(size(n * in), seed += 7), round);
            auto w = RoundedTo(RandomVector(size(r * in), seed + 1), round);
            auto dy = RoundedTo(RandomVector(size(n * r), seed + 2), round);
            auto w_grad0 = RandomVector(size(r * in), seed + 3);
            auto dx0 = RoundedTo(RandomVector(size(n * in), seed + 4), p.grad);
            std::vector<uint8_t> mask(size((n * in + 7) / 8));
            std::mt19937 rng(static_cast<uint32_t>(seed));
            for (uint8_t& byte : mask) byte = static_cast<uint8_t>(rng());
            Sides d(*backend_, ref_);
            const Pair xv = d.Data(x, p.in), wv = d.Data(w, p.in), dyv = d.Data(dy, dy_dtype);
            const Pair w_grad = d.F32(w_grad0), dx = d.Data(dx0, p.grad), bits = d.U8(mask);
            const Pair x_scratch = d.Data(std::vector<float>(size(n * in)), p.in);
            const Pair f32_scratch = d.F32(std::vector<float>(size(n * in)));
            backend_->DroppedLinearBackward(n, r, in, xv.got, bits.got, prob, wv.got, dyv.got, beta,
                                            w_grad.got, with_dx ? dx.got : View(), x_scratch.got,
                                            f32_scratch.got);
            ref_.DroppedLinearBackward(n, r, in, xv.want, bits.want, prob, wv.want, dyv.want, beta,
                                       w_grad.want, with_dx ? dx.want : View(), x_scratch.want,
                                       f32_scratch.want);
            const std::string what = "n=" + std::to_string(n) + " r=" + std::to_string(r) +
                                     " in=" + std::to_string(in) + " dy " + DTypeName(dy_dtype) +
                                     " dx=" + std::to_string(with_dx) +
                                     " beta=" + std::to_string(beta) + " p=" + std::to_string(prob);
            if (prob == 0.5f) {
              Expect("gemm/sqrt(k)", d.Error(w_grad) / std::sqrt(double(n)), tol().gemm_per_sqrt_k,
                     what + " w_grad");
              // (rank 1: a bf16 dx's error is its rounding, not the product's; its bits below)
              if (r > 1) {
                Expect("gemm/sqrt(k)", d.Error(dx) / std::sqrt(double(r)), tol().gemm_per_sqrt_k,
                       what + " dx");
              }
            }
            // The definition on the same backend: the same bits.
            DeviceArrays t(*backend_);
            const View w_grad2 = t.F32(w_grad0), dx2 = t.Data(dx0, p.grad);
            const View dropped = t.Data(std::vector<float>(size(n * in)), p.in);
            const View product = t.F32(std::vector<float>(size(n * in)));
            backend_->ApplyDropoutMask(xv.got, bits.got, prob, 0.0f, dropped);
            backend_->Gemm(true, false, r, in, n, dyv.got, r, dropped, in, beta, w_grad2, in);
            if (with_dx) {
              backend_->Gemm(false, false, n, in, r, dyv.got, r, wv.got, in, 0.0f, product, in);
              backend_->ApplyDropoutMask(product, bits.got, prob, 1.0f, dx2);
            }
            EXPECT_EQ(d.Got(w_grad), t.Get(w_grad2)) << what;
            EXPECT_EQ(d.Got(dx), t.Get(dx2)) << what;
            // The same bits on other thread counts (one thread takes every piece of the columns).
            for (int threads : {1, 3}) {
              BackendOptions options = std::get<0>(GetParam()).options;
              options.num_threads = threads;
              const auto other = std::move(CreateBackend(options)).value();
              DeviceArrays od(*other);
              const View ow_grad = od.F32(w_grad0), odx = od.Data(dx0, p.grad);
              other->DroppedLinearBackward(n, r, in, od.Data(x, p.in), od.U8(mask), prob,
                                           od.Data(w, p.in), od.Data(dy, dy_dtype), beta, ow_grad,
                                           with_dx ? odx : View(),
                                           od.Data(std::vector<float>(size(n * in)), p.in),
                                           od.F32(std::vector<float>(size(n * in))));
              EXPECT_EQ(od.Get(ow_grad), d.Got(w_grad)) << what << ", " << threads << " threads";
              EXPECT_EQ(od.Get(odx), d.Got(dx)) << what << ", " << threads << " threads";
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace air::engine
