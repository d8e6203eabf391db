// Native bf16 or conversion (see gemm_precision.h).
#include "engine/backend/cpu/gemm_precision.h"

#include "engine/backend/cpu/cpu_features.h"

namespace air::engine {

// The avx512bf16 level (cpu_features.h: AVX512_BF16 with AVX-512 BW and VL, not capped below
// it by AIR_CPU_KERNELS) is the one whose bf16 GEMM path runs vdpbf16ps (gemm_mixed.h).
bool CpuHasNativeBf16() { return SelectedCpuKernels() >= CpuKernels::kAvx512Bf16; }

std::string CpuBf16Note() {
  if (CpuHasNativeBf16()) return "";
  return std::string("bf16: this CPU path (") + CpuKernelsName(SelectedCpuKernels()) +
         ") has no bf16 dot-product instructions (AVX512-BF16), so bf16 products run by "
         "converting bf16 to fp32 on load: the same results as native bf16, at fp32 speed";
}

}  // namespace air::engine
