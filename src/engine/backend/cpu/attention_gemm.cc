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

// The tiles of C's rows [i, i + mr) within `band`: columns [j0, j1) in whole tiles of nr (band
// on columns), or K steps [p0, p1) in whole words of per_word steps (band on K); C outside them
// zeroed when beta is 0, as attention_gemm.h says. `none`: nothing left to compute.
struct RowTiles {
  int64_t j0, j1, p0, p1;
  bool none;
};

RowTiles TilesInBand(const AttentionBand& band, int64_t i, int64_t mr, int64_t n, int64_t k,
                     int64_t nr, int64_t per_word, float beta, const GemmResult& c) {
  const int64_t extent = band.on_columns ? n : k;
  const int64_t first = std::clamp(i + band.lo, int64_t{0}, extent);
  const int64_t last = std::clamp(i + mr - 1 + band.hi + 1, first, extent);
  RowTiles t{0, n, 0, k, false};
  if (band.on_columns) {
    t.j0 = first / nr * nr;
    t.j1 = std::min(n, (last + nr - 1) / nr * nr);
    if (t.j1 <= t.j0) t.j0 = t.j1 = 0;
    if (beta == 0.0f) {
      ZeroColumns(c, i, mr, 0, t.j0);
      ZeroColumns(c, i, mr, t.j1, n);
    }
    return t;
  }
  t.p0 = first / per_word * per_word;
  t.p1 = std::min(k, (last + per_word - 1) / per_word * per_word);
  if (t.p1 <= t.p0) {  // no step left: C = beta * C
    if (beta == 0.0f) ZeroColumns(c, i, mr, 0, n);
    t.none = beta == 0.0f || beta == 1.0f;
    t.p0 = 0;
    t.p1 = std::min(k, per_word);  // a zero product (the band's entries are zeros)
  }
  return t;
}

// C's tile at (i, j): where c.data + (i, j) is.
GemmResult TileOf(const GemmResult& c, int64_t i, int64_t j) {
  const int64_t at = i * c.ld + j;
  if (c.bf16) return {static_cast<uint16_t*>(c.data) + at, true, c.ld};
  return {static_cast<float*>(c.data) + at, false, c.ld};
}

// The avx512bf16 banded product with B packed and A in place (`a` BF16, (M, K) as stored) or
// in the pair panels a_panels.
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
    const RowTiles t = TilesInBand(band, i, mr, n, k, kNR, 2, beta, c);
    if (t.none) continue;
    Bf16Rows rows;
    if (a_in_place) {
      rows = {static_cast<const uint16_t*>(a.data) + i * a.ld + t.p0, 2 * a.ld, 4, mr};
    } else {
      rows = {a_panels + (i / kMR) * steps * kMR + t.p0 / 2 * kMR, 4, 4 * kMR, mr};
    }
    for (int64_t j = t.j0; j < t.j1; j += kNR) {
      const int64_t nr = std::min(kNR, n - j);
      const uint32_t* panel = b_data + (j / kNR) * steps * kNR + t.p0 / 2 * kNR;
      const GemmResult tile = TileOf(c, i, j);
      if (c.bf16) {
        const Bf16TileOut round_to{static_cast<uint16_t*>(tile.data), c.ld};
        MicroKernelAvx512Bf16(t.p1 - t.p0, rows, panel, {nullptr, 0, mr, nr, beta, true},
                              &round_to);
      } else {
        MicroKernelAvx512Bf16(t.p1 - t.p0, rows, panel,
                              {static_cast<float*>(tile.data), c.ld, mr, nr, beta, true}, nullptr);
      }
    }
  }
}

// The avx512 conversion path's banded product: A and B packed whole into fp32 panels (bf16
// widened, F32 rounded to bf16), the path's fp32 micro-kernel on the band's tiles, each over
// its K steps in one slice (GemmBf16FloatTile).
void BandedFloatProduct(GemmBf16Scratch& scratch, int64_t m, int64_t n, int64_t k,
                        const GemmOperand& a, const GemmOperand& b, float beta, const GemmResult& c,
                        const AttentionBand& band) {
  const Fp32MicroKernel kernel = Fp32MicroKernelFor(CpuKernels::kAvx512);
  const int64_t mr_max = kernel.mr, nr_max = kernel.nr;
  const auto panels = [k](int64_t count, int64_t width) {
    return static_cast<size_t>((count + width - 1) / width * width * k);
  };
  if (scratch.floats.packed_a.empty()) scratch.floats.packed_a.resize(1);
  std::vector<float>& a_buffer = scratch.floats.packed_a[0];
  std::vector<float>& b_buffer = scratch.floats.packed_b;
  if (a_buffer.size() < panels(m, mr_max)) a_buffer.resize(panels(m, mr_max));
  if (b_buffer.size() < panels(n, nr_max)) b_buffer.resize(panels(n, nr_max));
  PackFloatPanelsAvx2({a.data, a.bf16, a.ld, !a.trans, m}, mr_max, 0, m, 0, k, a_buffer.data());
  PackFloatPanelsAvx2({b.data, b.bf16, b.ld, b.trans, n}, nr_max, 0, n, 0, k, b_buffer.data());
  for (int64_t i = 0; i < m; i += mr_max) {
    const int64_t mr = std::min(mr_max, m - i);
    const RowTiles t = TilesInBand(band, i, mr, n, k, nr_max, 1, beta, c);
    if (t.none) continue;
    const float* a_panel = a_buffer.data() + (i / mr_max) * mr_max * k + t.p0 * mr_max;
    for (int64_t j = t.j0; j < t.j1; j += nr_max) {
      const float* b_panel = b_buffer.data() + (j / nr_max) * nr_max * k + t.p0 * nr_max;
      GemmBf16FloatTile(GemmBf16Path::kAvx512, t.p1 - t.p0, a_panel, b_panel, mr,
                        std::min(nr_max, n - j), beta, TileOf(c, i, j));
    }
  }
}

}  // namespace

bool AttentionGemmRuns(GemmBf16Path path) {
  return (path == GemmBf16Path::kAvx512Bf16 || path == GemmBf16Path::kAvx512) &&
         GemmBf16PathRuns(path, nullptr);
}

void AttentionGemmBf16(GemmBf16Path path, GemmBf16Scratch& scratch, int64_t m, int64_t n, int64_t k,
                       const GemmOperand& a, const GemmOperand& b, float beta, const GemmResult& c,
                       const AttentionBand& band) {
  if (path == GemmBf16Path::kAvx512) {
    return BandedFloatProduct(scratch, m, n, k, a, b, beta, c, band);
  }
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
