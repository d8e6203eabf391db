// The bf16 GEMM's paths (see gemm_mixed.h): for each, the panels it packs, its micro-kernel,
// and where a BF16 C's fp32 sums wait before their one rounding.
#include "engine/backend/cpu/gemm_mixed.h"

#include <immintrin.h>

// GCC 12 reports the undefined pass-through operand inside unmasked AVX-512 intrinsics as
// uninitialized (a false positive; vec_math.cc says the same).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>

#include "engine/backend/cpu/bf16_simd.h"
#include "engine/backend/cpu/gemm_blocking.h"
#include "engine/backend/cpu/gemm_kernels.h"
#include "engine/backend/cpu/gemm_mixed_pack.h"
#include "engine/backend/cpu/onednn_gemm.h"
#include "engine/check.h"

namespace air::engine {
namespace {

constexpr int64_t kFloatKC = 256;                // K slice of the fp32 panels, as fast_gemm's
constexpr int64_t kPairKC = kGemmBf16PairSlice;  // single slices for the training shapes
// Bounds the fp32 staging block of a BF16 C (rows x up to kGemmNBlock columns): 8 MiB.
constexpr int64_t kStagingFloats = int64_t{1} << 21;

struct Problem {
  int64_t m, n, k;
  GemmOperand a, b;
  float beta;
  GemmResult c;
};

CpuKernels LevelOf(GemmBf16Path path) {
  switch (path) {
    case GemmBf16Path::kAvx512Bf16:
    case GemmBf16Path::kOneDnn:  // oneDNN's own kernels; its fallback is the native path
      return CpuKernels::kAvx512Bf16;
    case GemmBf16Path::kAvx512:
      return CpuKernels::kAvx512;
    case GemmBf16Path::kAvx2:
      return CpuKernels::kAvx2;
    case GemmBf16Path::kGeneric:
      break;
  }
  return CpuKernels::kGeneric;
}

// The fp32 kernels' Bf16TileOut (gemm_kernels.h): C16 (mr x nr) = bf16(tile + partial +
// beta * C16), tile the last slice's sums, partial the earlier slices' (null: none).
void FinishBf16TileScalar(const float* tile, int64_t ld_tile, const float* partial,
                          int64_t ld_partial, const Bf16TileOut& dst, int64_t mr, int64_t nr,
                          float beta) {
  for (int64_t r = 0; r < mr; ++r) {
    for (int64_t j = 0; j < nr; ++j) {
      float v = tile[r * ld_tile + j];
      if (partial != nullptr) v += partial[r * ld_partial + j];
      uint16_t& c = dst.c[r * dst.ldc + j];
      if (beta != 0.0f) v = beta * WidenBf16(c) + v;
      c = RoundToBf16(v);
    }
  }
}

// The same, 8 columns at a time (AVX2: the avx2 and avx512 paths), the last columns of a row
// as the scalar one.
__attribute__((target("avx2,fma"))) void FinishBf16TileAvx2(const float* tile, int64_t ld_tile,
                                                            const float* partial,
                                                            int64_t ld_partial,
                                                            const Bf16TileOut& dst, int64_t mr,
                                                            int64_t nr, float beta) {
  const __m256 vbeta = _mm256_set1_ps(beta);
  const int64_t vector_cols = nr / 8 * 8;
  for (int64_t r = 0; r < mr; ++r) {
    uint16_t* crow = dst.c + r * dst.ldc;
    for (int64_t j = 0; j < vector_cols; j += 8) {
      __m256 v = _mm256_loadu_ps(tile + r * ld_tile + j);
      if (partial != nullptr) v = _mm256_add_ps(v, _mm256_loadu_ps(partial + r * ld_partial + j));
      if (beta != 0.0f) {
        const __m128i old = _mm_loadu_si128(reinterpret_cast<const __m128i*>(crow + j));
        v = _mm256_fmadd_ps(vbeta, WidenBf16x8(_mm256_cvtepu16_epi32(old)), v);
      }
      const __m256i bits = RoundToBf16x8(v);  // each below 0x10000: packs without saturating
      const __m128i packed =
          _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(crow + j), packed);
    }
  }
  if (vector_cols == nr) return;
  const float* partial_tail = partial == nullptr ? nullptr : partial + vector_cols;
  FinishBf16TileScalar(tile + vector_cols, ld_tile, partial_tail, ld_partial,
                       {dst.c + vector_cols, dst.ldc}, mr, nr - vector_cols, beta);
}

// The same, 16 columns at a time (AVX-512: the avx512 path), the last ones masked.
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) void FinishBf16TileAvx512(
    const float* tile, int64_t ld_tile, const float* partial, int64_t ld_partial,
    const Bf16TileOut& dst, int64_t mr, int64_t nr, float beta) {
  const __m512 vbeta = _mm512_set1_ps(beta);
  for (int64_t r = 0; r < mr; ++r) {
    uint16_t* crow = dst.c + r * dst.ldc;
    for (int64_t j = 0; j < nr; j += 16) {
      const __mmask16 mask = TailMask(nr - j);
      __m512 v = LoadF32x16(tile + r * ld_tile + j, mask);
      if (partial != nullptr) v = _mm512_add_ps(v, LoadF32x16(partial + r * ld_partial + j, mask));
      if (beta != 0.0f) v = _mm512_fmadd_ps(vbeta, LoadF32x16(crow + j, mask), v);
      StoreF32x16(crow + j, mask, v);
    }
  }
}

// A conversion path's micro-tile (the level's fp32 kernel): as TileOut says, or with its sums
// in a local tile, rounded to a BF16 C as Bf16TileOut says (partial: TileOut's c when not the
// first slice).
void FloatTile(GemmBf16Path path, const Fp32MicroKernel& kernel, int64_t kc, const float* ap,
               const float* bp, const TileOut& out, const Bf16TileOut* round_to) {
  if (round_to == nullptr) return kernel.fn(kc, ap, bp, out);
  alignas(64) float tile[kFp32MaxTileFloats];
  kernel.fn(kc, ap, bp, {tile, kernel.nr, out.mr, out.nr, 0.0f, true});
  const float* partial = out.first_slice ? nullptr : out.c;
  if (path == GemmBf16Path::kAvx512) {
    return FinishBf16TileAvx512(tile, kernel.nr, partial, out.ldc, *round_to, out.mr, out.nr,
                                out.beta);
  }
  if (path == GemmBf16Path::kAvx2) {
    return FinishBf16TileAvx2(tile, kernel.nr, partial, out.ldc, *round_to, out.mr, out.nr,
                              out.beta);
  }
  FinishBf16TileScalar(tile, kernel.nr, partial, out.ldc, *round_to, out.mr, out.nr, out.beta);
}

// K == 0: C = beta * C (beta == 0: zeros, whatever C held).
void ScaleOnly(const Problem& g) {
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      const int64_t at = i * g.c.ld + j;
      if (g.c.bf16) {
        uint16_t& v = static_cast<uint16_t*>(g.c.data)[at];
        v = g.beta == 0.0f ? 0 : RoundToBf16(g.beta * WidenBf16(v));
      } else {
        float& v = static_cast<float*>(g.c.data)[at];
        v = g.beta == 0.0f ? 0.0f : g.beta * v;
      }
    }
  }
}

// A path's panels: packing (F32/BF16 sources into Word panels; none for A when its kernel
// reads A in place), micro-tile and deepest K slice.
template <typename Word>
struct PathPanels {
  using PackFn = void (*)(const PanelSource&, int64_t, int64_t, int64_t, int64_t, int64_t, Word*);
  PackFn pack_a, pack_b;  // pack_a null: A read in place
  int64_t mr, nr;
  int64_t kc;
  int64_t k_per_word;
};

}  // namespace

// 1344 as 2 x 672 rather than 1024 + 320, so that no slice is a shallow one.
int64_t GemmSliceDepth(int64_t k, int64_t max_depth, int64_t k_per_word) {
  const int64_t slices = (k + max_depth - 1) / max_depth;
  const int64_t depth = (k + slices - 1) / slices;
  return (depth + k_per_word - 1) / k_per_word * k_per_word;
}

namespace {

// Runs a path. multiply(a_panel, b_panel, t, out, round_to) multiplies an A panel (null: A
// read in place) and a B panel into the micro-tile t: as TileOut says, or rounded to a BF16 C
// as Bf16TileOut says (gemm_kernels.h).
template <typename Word, typename Multiply>
void RunPath(const PathPanels<Word>& parts, const Multiply& multiply, const Problem& g,
             ThreadPool* pool, std::vector<std::vector<Word>>& packed_a,
             std::vector<Word>& packed_b, std::vector<float>& staging,
             const Word* prepacked_b = nullptr) {
  const int64_t kc = GemmSliceDepth(g.k, parts.kc, parts.k_per_word);
  const PanelSource a_src{g.a.data, g.a.bf16,      g.a.ld,         !g.a.trans,
                          g.m,      g.a.drop_bits, g.a.drop_bytes, g.a.drop_scale};
  const PanelSource b_src{g.b.data, g.b.bf16,      g.b.ld,         g.b.trans,
                          g.n,      g.b.drop_bits, g.b.drop_bytes, g.b.drop_scale};
  // A BF16 C over several K slices keeps its sums in fp32 until the last slice: a staging
  // block of row_block x stage_ld floats, indexed like C's current block.
  const bool staged = g.c.bf16 && g.k > kc;
  const int64_t stage_ld = std::min(g.n, kGemmNBlock);
  int64_t row_block = g.m;
  if (staged) {
    row_block = std::clamp(kStagingFloats / stage_ld / parts.mr * parts.mr, parts.mr, g.m);
    const size_t size = static_cast<size_t>(row_block * stage_ld);
    if (staging.size() < size) staging.resize(size);
  }
  const BlockedGemmShape shape{g.m, g.n, g.k, parts.mr, parts.nr, kc, parts.k_per_word, row_block};
  float* stage_data = staging.data();
  const auto pack_a = [&](int64_t i, int64_t rows, int64_t p0, int64_t depth, Word* dst) {
    parts.pack_a(a_src, parts.mr, i, rows, p0, depth, dst);
  };
  const auto pack_b = [&](int64_t j, int64_t cols, int64_t p0, int64_t depth, Word* dst) {
    parts.pack_b(b_src, parts.nr, j, cols, p0, depth, dst);
  };
  const auto kernel = [&](const Word* ap, const Word* bp, const MicroTile& t) {
    if (g.c.kept_bits != nullptr) {  // one slice (Run checks): the kept add into either C
      const KeptAdd kept{g.c.kept_bits, g.c.kept_bytes, t.i * g.c.ld + t.j, g.c.kept_scale};
      if (g.c.bf16) {
        const Bf16TileOut c16{static_cast<uint16_t*>(g.c.data) + t.i * g.c.ld + t.j, g.c.ld};
        return multiply(ap, bp, t, {nullptr, 0, t.mr, t.nr, 1.0f, true, &kept}, &c16);
      }
      float* c = static_cast<float*>(g.c.data) + t.i * g.c.ld + t.j;
      return multiply(ap, bp, t, {c, g.c.ld, t.mr, t.nr, 1.0f, true, &kept}, nullptr);
    }
    if (!g.c.bf16) {
      float* c = static_cast<float*>(g.c.data) + t.i * g.c.ld + t.j;
      return multiply(ap, bp, t, {c, g.c.ld, t.mr, t.nr, g.beta, t.first_slice}, nullptr);
    }
    float* sums = staged ? stage_data + (t.i % row_block) * stage_ld + t.j % kGemmNBlock : nullptr;
    if (!t.last_slice) {
      return multiply(ap, bp, t, {sums, stage_ld, t.mr, t.nr, 0.0f, t.first_slice}, nullptr);
    }
    const Bf16TileOut c{static_cast<uint16_t*>(g.c.data) + t.i * g.c.ld + t.j, g.c.ld};
    multiply(ap, bp, t, {sums, stage_ld, t.mr, t.nr, g.beta, t.first_slice}, &c);
  };
  if (parts.pack_a == nullptr) {
    return RunBlockedGemm<false>(shape, pool, packed_a, packed_b, pack_a, pack_b, kernel,
                                 prepacked_b);
  }
  RunBlockedGemm<true>(shape, pool, packed_a, packed_b, pack_a, pack_b, kernel, prepacked_b);
}

void Run(GemmBf16Path path, ThreadPool* pool, GemmBf16Scratch& scratch, const Problem& g) {
  AIR_ENGINE_CHECK(
      path == GemmBf16Path::kAvx512Bf16 || (g.a.drop_bits == nullptr && g.b.drop_bits == nullptr),
      "a dropped GEMM operand on a path other than avx512bf16");
  AIR_ENGINE_CHECK(g.c.kept_bits == nullptr || (path == GemmBf16Path::kAvx512Bf16 &&
                                                g.beta == 1.0f && g.k <= kGemmBf16PairSlice),
                   "a kept-mask add on a path other than avx512bf16, with beta other than 1 or "
                   "over more than one K slice");
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k <= 0) return ScaleOnly(g);
  if (path == GemmBf16Path::kOneDnn) {
    if (OneDnnMatmul().usable) {
      if (scratch.onednn == nullptr) scratch.onednn = std::make_shared<OneDnnGemm>();
      if (scratch.onednn->Gemm(pool, g.m, g.n, g.k, g.a, g.b, g.beta, g.c)) return;
    }
    path = SelectedGemmBf16Path();  // no oneDNN here, or no matmul for this layout
  }
  if (path == GemmBf16Path::kAvx512Bf16) {
    // A BF16 A stored (M, K) is read in place: its pairs are the words the kernel broadcasts
    // (a dropped one is packed: the mask applied on the way).
    const bool a_in_place = g.a.bf16 && !g.a.trans && g.a.drop_bits == nullptr;
    // A dropped A stored (M, K) is packed in the same row layout, the mask applied.
    const bool a_dropped_rows = g.a.drop_bits != nullptr && !g.a.trans;
    // At most 16 columns (LoRA's rank-r products): the 16 x 16 tile, no zero columns.
    const bool narrow = g.n <= kBf16NarrowNR;
    const int64_t mr = narrow ? kBf16NarrowMR : kBf16KernelMR;
    const PathPanels<uint32_t> parts{a_in_place       ? nullptr
                                     : a_dropped_rows ? PackPairRowsDropped
                                                      : PackPairPanels,
                                     PackPairPanels,
                                     mr,
                                     narrow ? kBf16NarrowNR : kBf16KernelNR,
                                     kPairKC,
                                     2};
    const auto multiply = [&](const uint32_t* ap, const uint32_t* bp, const MicroTile& t,
                              const TileOut& out, const Bf16TileOut* round_to) {
      Bf16Rows rows{ap, 4, 4 * mr, t.mr};
      if (a_dropped_rows) rows = {ap, 4 * ((t.kc + 1) / 2), 4, t.mr};
      if (a_in_place) {
        rows = {static_cast<const uint16_t*>(g.a.data) + t.i * g.a.ld + t.p0, 2 * g.a.ld, 4, t.mr};
      }
      if (narrow) return MicroKernelAvx512Bf16Narrow(t.kc, rows, bp, out, round_to);
      MicroKernelAvx512Bf16(t.kc, rows, bp, out, round_to);
    };
    AIR_ENGINE_CHECK(g.b.packed == nullptr || !narrow,
                     "a packed B for a product at most 16 columns wide (PackGemmBf16B packs none)");
    return RunPath(parts, multiply, g, pool, scratch.pairs_a, scratch.pairs_b, scratch.staging,
                   g.b.packed);
  }
  AIR_ENGINE_CHECK(g.b.packed == nullptr, "a packed B on a path other than avx512bf16");
  // The fp32 kernels: a BF16 C's sums go to a local tile first, then FinishBf16Tile*.
  const Fp32MicroKernel kernel = Fp32MicroKernelFor(LevelOf(path));
  const auto pack = path >= GemmBf16Path::kAvx2 ? PackFloatPanelsAvx2 : PackFloatPanels;
  const PathPanels<float> parts{pack, pack, kernel.mr, kernel.nr, kFloatKC, 1};
  const auto multiply = [&](const float* ap, const float* bp, const MicroTile& t,
                            const TileOut& out, const Bf16TileOut* round_to) {
    FloatTile(path, kernel, t.kc, ap, bp, out, round_to);
  };
  RunPath(parts, multiply, g, pool, scratch.floats.packed_a, scratch.floats.packed_b,
          scratch.staging);
}

}  // namespace

int64_t GemmBf16PackedBWords(GemmBf16Path path, int64_t n, int64_t k) {
  if (path != GemmBf16Path::kAvx512Bf16 || n <= kBf16NarrowNR || k <= 0) return 0;
  return BlockedBWords(
      {0, n, k, kBf16KernelMR, kBf16KernelNR, GemmSliceDepth(k, kPairKC, 2), 2, 0});
}

void PackGemmBf16B(ThreadPool* pool, int64_t n, int64_t k, const GemmOperand& b, uint32_t* packed) {
  AIR_ENGINE_CHECK(GemmBf16PackedBWords(GemmBf16Path::kAvx512Bf16, n, k) > 0,
                   "PackGemmBf16B: B must be over 16 columns and at least one row deep");
  const BlockedGemmShape shape{0, n, k, kBf16KernelMR, kBf16KernelNR, GemmSliceDepth(k, kPairKC, 2),
                               2, 0};
  const PanelSource src{b.data, b.bf16, b.ld, b.trans, n, b.drop_bits, b.drop_bytes, b.drop_scale};
  PackBlockedB(
      shape, pool,
      [&](int64_t j, int64_t cols, int64_t p0, int64_t depth, uint32_t* dst) {
        PackPairPanels(src, kBf16KernelNR, j, cols, p0, depth, dst);
      },
      packed);
}

const char* GemmBf16PathName(GemmBf16Path path) {
  return path == GemmBf16Path::kOneDnn ? "onednn" : CpuKernelsName(LevelOf(path));
}

void GemmBf16FloatTile(GemmBf16Path path, int64_t kc, const float* a_panel, const float* b_panel,
                       int64_t mr, int64_t nr, float beta, const GemmResult& c) {
  const Fp32MicroKernel kernel = Fp32MicroKernelFor(LevelOf(path));
  if (!c.bf16) {
    return FloatTile(path, kernel, kc, a_panel, b_panel,
                     {static_cast<float*>(c.data), c.ld, mr, nr, beta, true}, nullptr);
  }
  const Bf16TileOut round_to{static_cast<uint16_t*>(c.data), c.ld};
  FloatTile(path, kernel, kc, a_panel, b_panel, {nullptr, 0, mr, nr, beta, true}, &round_to);
}

GemmBf16Path NativeGemmBf16Path(CpuKernels level) {
  for (GemmBf16Path path :
       {GemmBf16Path::kAvx512Bf16, GemmBf16Path::kAvx512, GemmBf16Path::kAvx2}) {
    if (LevelOf(path) == level) return path;
  }
  return GemmBf16Path::kGeneric;
}

GemmBf16Path SelectedGemmBf16Path() { return NativeGemmBf16Path(SelectedCpuKernels()); }

bool GemmBf16PathRuns(GemmBf16Path path, std::string* why) {
  if (path == GemmBf16Path::kOneDnn) {
    if (OneDnnMatmul().usable) return true;
    if (why != nullptr) *why = OneDnnMatmul().why;
    return false;
  }
  if (DetectedCpuKernels() >= LevelOf(path)) return true;
  if (why != nullptr) {
    static constexpr const char* kNeeds[] = {"", "AVX2 and FMA", "AVX-512F",
                                             "AVX-512F, BW, VL, DQ and AVX512_BF16"};
    *why = std::string("needs ") + kNeeds[static_cast<int>(LevelOf(path))] +
           "; this CPU's best kernels are " + CpuKernelsName(DetectedCpuKernels());
  }
  return false;
}

void GemmBf16(ThreadPool& pool, GemmBf16Scratch& scratch, int64_t m, int64_t n, int64_t k,
              const GemmOperand& a, const GemmOperand& b, float beta, const GemmResult& c) {
  Run(SelectedGemmBf16Path(), &pool, scratch, {m, n, k, a, b, beta, c});
}

bool GemmBf16ConcatKRuns(GemmBf16Path path, int64_t k, const GemmOperand& a, int64_t k2,
                         const GemmOperand& a2, const GemmResult& c) {
  const auto in_place = [](const GemmOperand& x) {
    return x.bf16 && !x.trans && x.drop_bits == nullptr;
  };
  return path == GemmBf16Path::kAvx512Bf16 && k > 0 && k2 > 0 &&
         2 * ((k + 1) / 2 + (k2 + 1) / 2) <= kGemmBf16PairSlice && in_place(a) && in_place(a2) &&
         c.kept_bits == nullptr;
}

void GemmBf16ConcatK(ThreadPool* pool, GemmBf16Scratch& scratch, int64_t m, int64_t n, int64_t k,
                     const GemmOperand& a, const GemmOperand& b, int64_t k2, const GemmOperand& a2,
                     const GemmOperand& b2, float beta, const GemmResult& c) {
  AIR_ENGINE_CHECK(GemmBf16ConcatKRuns(GemmBf16Path::kAvx512Bf16, k, a, k2, a2, c),
                   "GemmBf16ConcatK: A and A2 must be BF16 stored (M, K), K + K2 one slice");
  if (m <= 0 || n <= 0) return;
  constexpr int64_t kNR = kBf16KernelNR;
  // One slice of K: the panel's words are B's ceil(K / 2) steps, then B2's.
  const int64_t steps = (k + 1) / 2, depth = steps + (k2 + 1) / 2;
  const BlockedGemmShape shape{m, n, 2 * depth, kBf16KernelMR, kNR, 2 * depth, 2, m};
  const PanelSource b_src{b.data, b.bf16, b.ld, b.trans, n};
  const PanelSource b2_src{b2.data, b2.bf16, b2.ld, b2.trans, n};
  const auto pack_a = [](int64_t, int64_t, int64_t, int64_t, uint32_t*) {};  // read in place
  const auto pack_b = [&](int64_t j, int64_t cols, int64_t, int64_t, uint32_t* dst) {
    for (int64_t at = 0; at < cols; at += kNR, dst += depth * kNR) {
      const int64_t width = std::min(kNR, cols - at);
      PackPairPanels(b_src, kNR, j + at, width, 0, k, dst);
      PackPairPanels(b2_src, kNR, j + at, width, 0, k2, dst + steps * kNR);
    }
  };
  const auto* a16 = static_cast<const uint16_t*>(a.data);
  const auto* a2_16 = static_cast<const uint16_t*>(a2.data);
  const auto kernel = [&](const uint32_t*, const uint32_t* panel, const MicroTile& t) {
    const Bf16Rows rows{a16 + t.i * a.ld, 2 * a.ld, 4, t.mr};
    const Bf16Segment second{k2, {a2_16 + t.i * a2.ld, 2 * a2.ld, 4, t.mr}};
    if (c.bf16) {
      const Bf16TileOut round_to{static_cast<uint16_t*>(c.data) + t.i * c.ld + t.j, c.ld};
      return MicroKernelAvx512Bf16TwoSegments(k, rows, second, panel,
                                              {nullptr, 0, t.mr, t.nr, beta, true}, &round_to);
    }
    float* out = static_cast<float*>(c.data) + t.i * c.ld + t.j;
    MicroKernelAvx512Bf16TwoSegments(k, rows, second, panel, {out, c.ld, t.mr, t.nr, beta, true},
                                     nullptr);
  };
  RunBlockedGemm<false>(shape, pool, scratch.pairs_a, scratch.pairs_b, pack_a, pack_b, kernel);
}

void GemmBf16OnPath(GemmBf16Path path, ThreadPool* pool, GemmBf16Scratch& scratch, int64_t m,
                    int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b, float beta,
                    const GemmResult& c) {
  Run(path, pool, scratch, {m, n, k, a, b, beta, c});
}

}  // namespace air::engine
