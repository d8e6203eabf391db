// The bf16 matrix multiply with fp32 accumulation, for the typed FastOps::Gemm:
//   C (M,N) = op(A) (M,K) @ op(B) (K,N) + beta * C
// row-major with leading dimensions, the transposes as in Ops::Gemm (trans: A stored (K,M), B
// stored (N,K)). A and B are each F32 or BF16 (uint16 bits); C is F32 or BF16.
//
// Semantics, on every path: each input element is rounded to bf16 (round to nearest even, as
// dtype.h's F32ToBf16; BF16 inputs are taken as they are), products of two bf16 are exact in
// fp32, sums are fp32; beta * C is read as fp32 and added once; a BF16 C gets the fp32 result
// rounded once (to nearest even). beta == 0 ignores C (NaN too). Paths differ in the order of
// their fp32 sums (and vdpbf16ps flushes subnormal inputs and results to zero), so their bits
// differ; each path gives the same bits whatever the thread count or repeat.
//
// Paths (GemmBf16Path); FastOps takes the one gemm_path.h chooses for the CPU (or AIR_CPU_PATH):
//   onednn      oneDNN's bf16 matmul (onednn_gemm.h: AMX tiles where the CPU and OS allow, else
//               its AVX512 kernels), libdnnl.so.2 opened at run time; a layout it has no matmul
//               for runs on the native path of the kernel level (SelectedGemmBf16Path)
//   avx512bf16  vdpbf16ps on B packed in VNNI pairs along K, pairs of A broadcast (a BF16 A
//               stored (M, K) is read in place: its pairs are already 32-bit words)
//   avx512      bf16 -> fp32 when packing, the fp32 FMA micro-kernel (AVX-512F)
//   avx2        the same with AVX2 + FMA
//   generic     the same with portable loops
// The loop nest is fast_gemm.h's (gemm_blocking.h): op(B) packed per KC x NC block by all
// threads, C tiles spread over the pool, each thread packing its rows of op(A); K in equal
// slices of up to 2048 (avx512bf16: one slice for the training shapes) or 256 (the others).
// A BF16 C whose K takes more than one slice keeps its partial sums in an fp32 staging block
// (scratch) until the last slice, which rounds them once.
//
// Thread safety: one call per scratch at a time; GemmBf16OnPath with no pool may run inside a pool
// task (each task with its own scratch).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/fast_gemm.h"
#include "engine/backend/cpu/thread_pool.h"
#include "engine/dtype.h"

namespace air::engine {

// An input matrix: op(X) is (rows, cols) of the product; `trans` says X is stored transposed
// (A: (K, M); B: (N, K)), `ld` is the row stride of the stored matrix in elements.
struct GemmOperand {
  const void* data;  // float* or uint16_t* (bf16 bits)
  bool bf16;
  int64_t ld;
  bool trans;
  // A dropped operand (Ops::GemmDropped; the avx512bf16 path, and NarrowGemmBf16 on the avx512
  // path: gemm_narrow.h): element i of the stored matrix
  // (row * ld + column) read as ApplyDropoutMask(., bits, p, 0) writes it, bit for bit:
  // RoundToBf16(bit i ? x * drop_scale : 0), drop_scale = 1 / (1 - p). Null: as stored.
  const uint8_t* drop_bits = nullptr;
  int64_t drop_bytes = 0;  // of drop_bits
  float drop_scale = 1.0f;
  // B only: its panels as PackGemmBf16B laid them out for this product's N and K (avx512bf16
  // path, N above 16); data, ld and trans are then unread. Null: packed by the call.
  const uint32_t* packed = nullptr;
};

struct GemmResult {
  void* data;  // float* or uint16_t* (bf16 bits), (M, N) with row stride ld
  bool bf16;
  int64_t ld;
  // The product added into C through a kept mask (Ops::GemmAddDropped; avx512bf16 path, beta 1,
  // K at most kGemmBf16PairSlice; or the narrow GEMM, gemm_narrow.h): C += (bit e ? product *
  // kept_scale : 0) for element e = row * ld + column (a BF16 C widened and rounded once),
  // ApplyDropoutMask's accumulate bit for bit. Null: plain C.
  const uint8_t* kept_bits = nullptr;
  int64_t kept_bytes = 0;
  float kept_scale = 1.0f;
};

// The deepest K the avx512bf16 path takes in one slice.
inline constexpr int64_t kGemmBf16PairSlice = 2048;

// The depth of the equal slices a GEMM takes K in: a multiple of k_per_word, none deeper than
// max_depth (the avx512bf16 path's: GemmSliceDepth(k, kGemmBf16PairSlice, 2)).
int64_t GemmSliceDepth(int64_t k, int64_t max_depth, int64_t k_per_word);

enum class GemmBf16Path { kGeneric = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3, kOneDnn = 4 };

// "generic", "avx2", "avx512", "avx512bf16", "onednn"
const char* GemmBf16PathName(GemmBf16Path path);
// The native path of SelectedCpuKernels()'s level: what GemmBf16 takes.
GemmBf16Path SelectedGemmBf16Path();
// The path whose kernels are those of `level` (avx512bf16's vdpbf16ps, else the conversion).
GemmBf16Path NativeGemmBf16Path(CpuKernels level);
// Whether this CPU can execute `path`; when not, *why says which CPU feature is missing.
bool GemmBf16PathRuns(GemmBf16Path path, std::string* why);

class OneDnnGemm;

// Packing buffers and the fp32 staging block, reused across calls (grown, never shrunk):
// fp32 panels for the conversion paths (fast_gemm.h's), bf16 pair panels for avx512bf16, and
// the onednn path's primitives (created on its first call).
struct GemmBf16Scratch {
  std::shared_ptr<OneDnnGemm> onednn;
  GemmScratch floats;
  std::vector<std::vector<uint32_t>> pairs_a;  // per thread, by the pool's thread index
  std::vector<uint32_t> pairs_b;               // shared by the threads of one call
  std::vector<float> staging;                  // fp32 partial sums of a BF16 C across K slices
};

void GemmBf16(ThreadPool& pool, GemmBf16Scratch& scratch, int64_t m, int64_t n, int64_t k,
              const GemmOperand& a, const GemmOperand& b, float beta, const GemmResult& c);

// On an explicit path (tests and benchmarks; the path must run on this CPU:
// GemmBf16PathRuns). pool == nullptr runs serially.
void GemmBf16OnPath(GemmBf16Path path, ThreadPool* pool, GemmBf16Scratch& scratch, int64_t m,
                    int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b, float beta,
                    const GemmResult& c);

// One micro-tile of a conversion path (avx512, avx2, generic: the level's Fp32MicroKernel,
// gemm_kernels.h, mr x nr of it valid) on packed float panels (PackFloatPanels*) over kc steps
// of K in one slice: C = A panel @ B panel + beta * C with c.data at the tile's first element,
// a BF16 C rounded once. GemmBf16OnPath's tiles, for products that choose their own
// (attention_gemm.h's banded ones).
void GemmBf16FloatTile(GemmBf16Path path, int64_t kc, const float* a_panel, const float* b_panel,
                       int64_t mr, int64_t nr, float beta, const GemmResult& c);

// B laid out once for several products that read it (a language model head's row chunks): the
// words of its panels on `path` for N columns and K rows (0 where the path packs no such panels:
// other paths than avx512bf16, or N at most 16, the narrow tile's), and the packing into
// `packed` (that many words); a GemmOperand with `packed` set then reads them in place of B. The
// same panels as each product packs: the same bits.
int64_t GemmBf16PackedBWords(GemmBf16Path path, int64_t n, int64_t k);
// The bytes FastOps takes for a packed B of `dtype` on `path` (Ops::GemmPackedBBytes): BF16 only.
inline int64_t GemmBf16PackedBBytes(GemmBf16Path path, int64_t n, int64_t k, DType dtype) {
  return dtype == DType::kBF16 ? 4 * GemmBf16PackedBWords(path, n, k) : 0;
}
void PackGemmBf16B(ThreadPool* pool, int64_t n, int64_t k, const GemmOperand& b, uint32_t* packed);

// Two products summed in one set of accumulators (Ops::GemmConcatK, LoRA's y = x W^T + u B^T):
//   C (M,N) = A (M,K) @ op(B) + A2 (M,K2) @ op(B2) + beta * C
// on the avx512bf16 path, A and A2 BF16 stored (M, K) and (M, K2) (read in place), B and B2
// packed into one panel per 32 columns (B's pairs, then B2's), C stored or rounded once. The
// bits of GemmBf16 on the concatenated operands [A | A2] and [op(B); op(B2)] (an odd K padded
// with one zero step). GemmBf16ConcatKRuns says whether a call qualifies.
bool GemmBf16ConcatKRuns(GemmBf16Path path, int64_t k, const GemmOperand& a, int64_t k2,
                         const GemmOperand& a2, const GemmResult& c);
void GemmBf16ConcatK(ThreadPool* pool, GemmBf16Scratch& scratch, int64_t m, int64_t n, int64_t k,
                     const GemmOperand& a, const GemmOperand& b, int64_t k2, const GemmOperand& a2,
                     const GemmOperand& b2, float beta, const GemmResult& c);

}  // namespace air::engine
