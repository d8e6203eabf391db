// The per-op harness (ops_harness_test.cc) for a B packed once and read by several products
// (PackGemmB, GemmPackedB: a language model head's weight across its row chunks): on a backend
// that packs (GemmPackedBBytes > 0: the fast backend's avx512bf16 path, BF16), bit for bit Gemm
// on the B it was packed from, and within the GEMM tolerance of the reference, over several
// column blocks and K slices, both layouts of B, beta 0 and 1; a backend that reads B as it is
// stored says 0 bytes.
#include <gtest/gtest.h>

#include <cmath>
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
using testing::Sides;

TEST_P(OpsHarness, GemmPackedBIsGemmOnTheBItWasPackedFrom) {
  if (!Runs(OpKind::kPackGemmB) || !Runs(OpKind::kGemmPackedB)) return;
  const Precision& p = precision();
  const DType c_dtype = p.name == "bf16" ? p.out : p.grad;
  uint64_t seed = 170;
  // Several column blocks (4500 > 4096), two K slices (2500 > 2048), ragged panels and tiles.
  for (auto [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {5, 40, 9}, {37, 300, 2500}, {130, 4500, 64}}) {
    const int64_t bytes = backend_->GemmPackedBBytes(n, k, p.in);
    if (bytes == 0) {  // this backend reads B as it is stored: nothing to pack
      std::printf("[%s %s] no packed B for %lld x %lld\n", backend_->name().c_str(), p.name.c_str(),
                  static_cast<long long>(k), static_cast<long long>(n));
      continue;
    }
    for (int tb = 0; tb < 2; ++tb) {
      for (float beta : {0.0f, 1.0f}) {
        const int64_t ldb = tb ? k : n;
        const DType round = p.in == DType::kBF16 ? DType::kBF16 : DType::kF32;
        auto a = RoundedTo(RandomVector(static_cast<size_t>(m * k), seed += 3), round);
        auto b = RoundedTo(RandomVector(static_cast<size_t>(k * n), seed + 1), round);
        auto c0 = RoundedTo(RandomVector(static_cast<size_t>(m * n), seed + 2), c_dtype);
        Sides d(*backend_, ref_);
        const Pair av = d.Data(a, p.in), bv = d.Data(b, p.in), c = d.Data(c0, c_dtype);
        DeviceArrays t(*backend_);
        const View packed = t.U8(std::vector<uint8_t>(static_cast<size_t>(bytes), 0xA5));
        backend_->PackGemmB(tb, n, k, bv.got, ldb, packed);
        backend_->GemmPackedB(m, n, k, av.got, k, packed, beta, c.got, n);
        ref_.Gemm(false, tb, m, n, k, av.want, k, bv.want, ldb, beta, c.want, n);
        const std::string what = "m=" + std::to_string(m) + " n=" + std::to_string(n) +
                                 " k=" + std::to_string(k) + " tb=" + std::to_string(tb) +
                                 " beta=" + std::to_string(beta);
        Expect("gemm/sqrt(k)", d.Error(c) / std::sqrt(double(k)), tol().gemm_per_sqrt_k, what);
        const View c2 = t.Data(c0, c_dtype);
        backend_->Gemm(false, tb, m, n, k, av.got, k, bv.got, ldb, beta, c2, n);
        EXPECT_EQ(d.Got(c), t.Get(c2)) << what;
      }
    }
  }
}

}  // namespace
}  // namespace air::engine
