// Native bf16 or conversion (see gemm_precision.h).
#include "engine/ops/cpu/gemm_precision.h"

#include "engine/ops/cpu/cpu_features.h"

namespace air::engine {

bool CpuHasNativeBf16() { return UseAvx512() && __builtin_cpu_supports("avx512bf16"); }

std::string CpuBf16Note() {
  if (CpuHasNativeBf16()) return "";
  return std::string("bf16: this CPU path (") + CpuKernelsName(SelectedCpuKernels()) +
         ") has no bf16 dot-product instructions (AVX512-BF16), so bf16 products run by "
         "converting bf16 to fp32 on load: the same results as native bf16, at fp32 speed";
}

}  // namespace air::engine
