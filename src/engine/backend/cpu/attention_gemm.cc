// Attention's banded bf16 products (see attention_gemm.h).
#include "engine/backend/cpu/attention_gemm.h"

#include <algorithm>
#include <cstring>

#include "engine/backend/cpu/gemm_kernels.h"
#include "engine/backend/cpu/gemm_mixed_pack.h"

namespace air::engine {
namespace {

constexpr int64_t kMR = kBf16KernelMR;
constexpr int64_t kNR = kBf16KernelNR;
static_assert(kMR == kAttentionPanelRows);

// Zeros rows [0, rows) x columns [j0, j1) of C.
void ZeroColumns(const GemmResult& c, int64_t row0, int64_t rows, int64_t j0, int64_t j1) {
  if (j1 <= j0) return;
  const size_t size = c.bf16 ? sizeof(uint16_t) : sizeof(float);
  for (int64_t r = row0; r < row0 + rows; ++r) {
    char* at = static_cast<char*>(c.data) + (r * c.ld + j0) * static_cast<int64_t>(size);
    std::memset(at, 0, static_cast<size_t>(j1 - j0) * size);
  }
}

// The banded product with B packed and A in place (`a` BF16, (M, K) as stored) or in the pair
// panels a_panels.
void BandedProduct(GemmBf16Scratch& scratch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                   const uint32_t* a_panels, const GemmOperand& b, float beta, const GemmResult& c,
                   const AttentionBand& band) {
  const int64_t steps = (k + 1) / 2;  // pair words per panel lane
  // B whole: ceil(n / NR) panels of `steps` x NR words.
  const int64_t b_panels = (n + kNR - 1) / kNR;
  if (scratch.pairs_b.size() < static_cast<size_t>(b_panels * steps * kNR)) {
    scratch.pairs_b.resize(static_cast<size_t>(b_panels * steps * kNR));
  }
  PackPairPanels({b.data, b.bf16, b.ld, b.trans, n}, kNR, 0, n, 0, k, scratch.pairs_b.data());
  const bool a_in_place = a_panels == nullptr;
  const uint32_t* b_data = scratch.pairs_b.data();
  for (int64_t i = 0; i < m; i += kMR) {
    const int64_t mr = std::min(kMR, m - i);
    // The band of rows [i, i + mr): indices [first, last).
    const int64_t extent = band.on_columns ? n : k;
    const int64_t first = std::clamp(i + band.lo, int64_t{0}, extent);
    const int64_t last = std::clamp(i + mr - 1 + band.hi + 1, first, extent);
    int64_t j0 = 0, j1 = n, p0 = 0, p1 = k;
    if (band.on_columns) {
      j0 = first / kNR * kNR;
      j1 = std::min(n, (last + kNR - 1) / kNR * kNR);
      if (j1 <= j0) j0 = j1 = 0;
      if (beta == 0.0f) {
        ZeroColumns(c, i, mr, 0, j0);
        ZeroColumns(c, i, mr, j1, n);
      }
    } else {
      p0 = first / 2 * 2;
      p1 = std::min(k, (last + 1) / 2 * 2);
      if (p1 <= p0) {  // no step left: C = beta * C
        if (beta == 0.0f) ZeroColumns(c, i, mr, 0, n);
        if (beta == 0.0f || beta == 1.0f) continue;
        p0 = 0;
        p1 = std::min<int64_t>(k, 2);  // a zero product (the band's entries are zeros)
      }
    }
    Bf16Rows rows;
    if (a_in_place) {
      rows = {static_cast<const uint16_t*>(a.data) + i * a.ld + p0, 2 * a.ld, 4, mr};
    } else {
      rows = {a_panels + (i / kMR) * steps * kMR + p0 / 2 * kMR, 4, 4 * kMR, mr};
    }
    for (int64_t j = j0; j < j1; j += kNR) {
      const int64_t nr = std::min(kNR, n - j);
      const uint32_t* panel = b_data + (j / kNR) * steps * kNR + p0 / 2 * kNR;
      if (c.bf16) {
        const Bf16TileOut round_to{static_cast<uint16_t*>(c.data) + i * c.ld + j, c.ld};
        MicroKernelAvx512Bf16(p1 - p0, rows, panel, {nullptr, 0, mr, nr, beta, true}, &round_to);
      } else {
        float* out = static_cast<float*>(c.data) + i * c.ld + j;
        MicroKernelAvx512Bf16(p1 - p0, rows, panel, {out, c.ld, mr, nr, beta, true}, nullptr);
      }
    }
  }
}

}  // namespace

bool AttentionGemmRuns(GemmBf16Path path) {
  return path == GemmBf16Path::kAvx512Bf16 && GemmBf16PathRuns(path, nullptr);
}

void AttentionGemmBf16(GemmBf16Scratch& scratch, int64_t m, int64_t n, int64_t k,
                       const GemmOperand& a, const GemmOperand& b, float beta, const GemmResult& c,
                       const AttentionBand& band) {
  if (a.bf16 && !a.trans) return BandedProduct(scratch, m, n, k, a, nullptr, b, beta, c, band);
  // A packed whole into MR-row panels.
  if (scratch.pairs_a.empty()) scratch.pairs_a.resize(1);
  auto& buffer = scratch.pairs_a[0];
  const int64_t words = (m + kMR - 1) / kMR * ((k + 1) / 2) * kMR;
  if (buffer.size() < static_cast<size_t>(words)) buffer.resize(static_cast<size_t>(words));
  PackPairPanels({a.data, a.bf16, a.ld, !a.trans, m}, kMR, 0, m, 0, k, buffer.data());
  BandedProduct(scratch, m, n, k, a, buffer.data(), b, beta, c, band);
}

void AttentionGemmBf16PackedA(GemmBf16Scratch& scratch, int64_t m, int64_t n, int64_t k,
                              const uint32_t* a_panels, const GemmOperand& b, float beta,
                              const GemmResult& c, const AttentionBand& band) {
  BandedProduct(scratch, m, n, k, {nullptr, true, 0, true}, a_panels, b, beta, c, band);
}

}  // namespace air::engine
