// Which path the bf16 GEMM (gemm_mixed.h) takes on this CPU, chosen at run time:
//
//   AIR_CPU_PATH=onednn|avx512bf16|avx512|avx2|generic forces one (a path this CPU cannot run,
//   or an unknown name, is an error listing the paths it can run and why the others cannot);
//   otherwise the rule below, from what the CPU has:
//
//   1. AMX-BF16 tiles usable (amx_tiles.h: the CPU has them and Linux grants the tile state)
//      and oneDNN loads -> onednn: oneDNN's AMX matmul. An AMX tile multiply does 16x the
//      multiply-adds of a vdpbf16ps; on the 16-core Sapphire Rapids of issue 34 air's AVX512-BF16
//      kernel trained no faster in bf16 than in fp32 (Intel's vdpbf16ps does the work of two fp32
//      FMAs at half their rate), while PyTorch's oneDNN AMX matmuls ran bf16 1.7x its fp32.
//   2. AVX512_BF16 on an Intel CPU (Cooper Lake, or an AMX CPU whose tiles the OS or the
//      hypervisor withholds) -> avx512: the conversion path (bf16 storage, fp32 FMA math).
//      Intel's cores run vdpbf16ps at half their fp32 FMA rate: on an Emerald Rapids guest
//      without AMX (family 6 model 207, one thread, bench/gemm --table bf16) the register-only
//      peaks were vdpbf16ps 86 and FMA 176 GFLOP/s, every bf16 product of the 4 x 512 step ran
//      at 78-86 GFLOP/s on vdpbf16ps (air's and oneDNN's alike) and at 123-149 on the conversion
//      path, and bench/train_step's bf16 step trained at 0.69x its fp32 one on vdpbf16ps and at
//      1.01x on the conversion path (docs/performance.md); the plan says so.
//   3. AVX512_BF16 elsewhere (AMD Zen 4/5) -> avx512bf16: air's vdpbf16ps kernel. On Zen 4 (one
//   thread, CPU clock, bench/gemm
//      --table bf16) it ran the 4 x 512 step's products at 0.92-1.08x oneDNN's avx512_core_bf16
//      matmul (oneDNN up to 8% ahead on the forward and input-gradient products, air up to 8% on
//      the weight gradients) and 1.95-2.73x air's fp32 kernel: a tie with oneDNN, which air's
//      path wins on what is around it — no OpenMP team beside the pool, no rounding pass for
//      the F32 gradient operands, the same bits at every thread count (docs/performance.md,
//      "Which CPU GEMM path"). On Intel without AMX vdpbf16ps does the work of two fp32 FMAs at
//      half their rate: no faster than fp32 there, and no slower (half the bytes packed).
//   4. Otherwise the kernel level's conversion path (avx512, avx2, generic): bf16 storage, fp32
//      FMA math, the same speed as fp32 and the same results as native bf16; the plan says so.
//   AIR_CPU_KERNELS capping the kernels below avx512bf16 picks rule 4 at the capped level.
// The kernels around the GEMM that have a vdpbf16ps form (attention's products and fused
// tiles, LoRA's dropped products) take it only on the avx512bf16 path, and attention's on the
// onednn path where the CPU is not Intel (FastOps::native_bf16_path, PathBesideOneDnn), so the
// conversion path's choice covers the whole step.
//
// A documented rule rather than a timing at start-up: the path decides the results' bits, and
// a timing on a shared host would flip between two close paths from one run to the next (a
// resumed run on another path would not continue the same numbers). bench/gemm/bench.py
// --table bf16 measures every path this CPU runs side by side, to check the rule on a new CPU.
// Thread safety: pure functions over process-wide probes made once (amx_tiles.h, onednn_gemm.h).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/gemm_mixed.h"

namespace air::engine {

struct GemmPathChoice {
  GemmBf16Path path = GemmBf16Path::kGeneric;
  // Why: "AMX-BF16 tiles (oneDNN brg:avx512_core_amx)", "AIR_CPU_PATH=avx512", ...
  std::string reason;
  // Non-empty when bf16 products on this path are computed in fp32 (a plan note).
  std::string fp32_math_note;
};

// Every path, best first: onednn, avx512bf16, avx512, avx2, generic.
const std::vector<GemmBf16Path>& AllGemmBf16Paths();
// Parses a path name; InvalidArgument listing the names otherwise.
Result<GemmBf16Path> ParseGemmBf16Path(const std::string& name);

// What the rule decides from: this CPU's (ThisCpuGemmPathFacts), or any other CPU's in tests.
struct GemmPathFacts {
  CpuKernels selected = CpuKernels::kGeneric;  // SelectedCpuKernels()
  CpuKernels detected = CpuKernels::kGeneric;  // DetectedCpuKernels()
  bool intel = false;                          // CpuIsIntel()
  bool amx_usable = false;
  std::string amx_why;  // AmxSupport::why
  bool onednn_usable = false;
  std::string onednn_why;  // OneDnnMatmul().why
};
GemmPathFacts ThisCpuGemmPathFacts();
// The rule above (no AIR_CPU_PATH), from the facts alone.
GemmPathChoice GemmPathByRule(const GemmPathFacts& facts);

// The path of the kernels around the GEMM (attention's products and tiles:
// FastOps::native_bf16_path) when the GEMM is onednn: the rule's choice without oneDNN, so
// avx512 on an Intel CPU (whose vdpbf16ps runs at half its FMA rate: on the Emerald Rapids guest
// attention's banded avx512 products ran 1.1x its avx512bf16 tiles, bench/gemm --attention) and
// the kernel level's native path elsewhere. The second form: this CPU's (probed once).
GemmBf16Path PathBesideOneDnn(GemmPathFacts facts);
GemmBf16Path PathBesideOneDnn();

// `forced` (a path's name) if not empty, else AIR_CPU_PATH if set, else the rule. Forcing a
// path this CPU cannot run is FailedPrecondition naming it, why, and the paths this CPU runs.
Result<GemmPathChoice> ChooseGemmBf16Path(const std::string& forced = "");

// "onednn (brg:avx512_core_amx)", "avx512bf16": the path and, for onednn, oneDNN's kernels.
std::string DescribeGemmBf16Path(GemmBf16Path path);

}  // namespace air::engine
