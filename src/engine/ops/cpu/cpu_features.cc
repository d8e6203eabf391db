// Run-time choice of the vector kernels (see cpu_features.h).
#include "engine/ops/cpu/cpu_features.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

namespace air::engine {
namespace {

constexpr CpuKernels kAllKernels[] = {CpuKernels::kAvx512, CpuKernels::kAvx2, CpuKernels::kGeneric};

// The cap AIR_CPU_KERNELS names; nullopt when unset or not a kernel name.
std::optional<CpuKernels> RequestedCap() {
  const char* value = std::getenv("AIR_CPU_KERNELS");
  if (value == nullptr) return std::nullopt;
  for (CpuKernels k : kAllKernels) {
    if (std::strcmp(value, CpuKernelsName(k)) == 0) return k;
  }
  return std::nullopt;
}

CpuKernels Detect() {
  CpuKernels best = CpuKernels::kGeneric;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = CpuKernels::kAvx2;
  if (__builtin_cpu_supports("avx512f")) best = CpuKernels::kAvx512;
  const std::optional<CpuKernels> cap = RequestedCap();
  return cap ? std::min(best, *cap) : best;
}

}  // namespace

CpuKernels SelectedCpuKernels() {
  static const CpuKernels selected = Detect();
  return selected;
}

std::string CpuKernelsSettingProblem() {
  const char* value = std::getenv("AIR_CPU_KERNELS");
  if (value == nullptr || RequestedCap()) return "";
  return std::string("AIR_CPU_KERNELS=") + value + " is not one of avx512, avx2, generic; ignored";
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
