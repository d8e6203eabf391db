// Run-time choice of the vector kernels (see cpu_features.h).
#include "engine/ops/cpu/cpu_features.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace air::engine {
namespace {

CpuKernels Detect() {
  CpuKernels best = CpuKernels::kGeneric;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = CpuKernels::kAvx2;
  if (__builtin_cpu_supports("avx512f")) best = CpuKernels::kAvx512;
  const char* cap = std::getenv("AIR_CPU_KERNELS");
  if (cap == nullptr) return best;
  const std::string wanted = cap;
  if (wanted == "generic") return CpuKernels::kGeneric;
  if (wanted == "avx2") return std::min(best, CpuKernels::kAvx2);
  return best;  // "avx512" or anything else: no cap
}

}  // namespace

CpuKernels SelectedCpuKernels() {
  static const CpuKernels selected = Detect();
  return selected;
}

std::string CpuKernelsSettingProblem() {
  const char* cap = std::getenv("AIR_CPU_KERNELS");
  if (cap == nullptr) return "";
  const std::string value = cap;
  if (value == "avx512" || value == "avx2" || value == "generic") return "";
  return "AIR_CPU_KERNELS=" + value + " is not one of avx512, avx2, generic; ignored";
}

const char* CpuKernelsName(CpuKernels kernels) {
  switch (kernels) {
    case CpuKernels::kAvx512:
      return "avx512";
    case CpuKernels::kAvx2:
      return "avx2";
    case CpuKernels::kGeneric:
      break;
  }
  return "generic";
}

}  // namespace air::engine
