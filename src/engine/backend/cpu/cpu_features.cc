// Run-time choice of the vector kernels (see cpu_features.h).
#include "engine/backend/cpu/cpu_features.h"

#include <cpuid.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

namespace air::engine {
namespace {

constexpr CpuKernels kAllKernels[] = {CpuKernels::kAvx512Bf16, CpuKernels::kAvx512,
                                      CpuKernels::kAvx2, CpuKernels::kGeneric};

// The cap AIR_CPU_KERNELS names; nullopt when unset or not a kernel name.
std::optional<CpuKernels> RequestedCap() {
  const char* value = std::getenv("AIR_CPU_KERNELS");
  if (value == nullptr) return std::nullopt;
  for (CpuKernels k : kAllKernels) {
    if (std::strcmp(value, CpuKernelsName(k)) == 0) return k;
  }
  return std::nullopt;
}

// AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16): CPUID leaf 7, sub-leaf 1, EAX bit 5. The AVX-512
// register state the OS enables is checked by __builtin_cpu_supports("avx512f").
bool HasAvx512Bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax & (1u << 5)) != 0;
}

CpuKernels Detect() {
  CpuKernels best = CpuKernels::kGeneric;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = CpuKernels::kAvx2;
  if (__builtin_cpu_supports("avx512f")) {
    best = CpuKernels::kAvx512;
    // The bf16 kernel also packs with AVX512BW's 16-bit permutes and rounds with vcvtneps2bf16
    // after DQ's vfpclassps (every CPU with AVX512_BF16 has DQ).
    if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && HasAvx512Bf16()) {
      best = CpuKernels::kAvx512Bf16;
    }
  }
  return best;
}

}  // namespace

CpuKernels DetectedCpuKernels() {
  static const CpuKernels detected = Detect();
  return detected;
}

CpuKernels SelectedCpuKernels() {
  static const CpuKernels selected = [] {
    const std::optional<CpuKernels> cap = RequestedCap();
    return cap ? std::min(DetectedCpuKernels(), *cap) : DetectedCpuKernels();
  }();
  return selected;
}

std::string CpuKernelsSettingProblem() {
  const char* value = std::getenv("AIR_CPU_KERNELS");
  if (value == nullptr || RequestedCap()) return "";
  return std::string("AIR_CPU_KERNELS=") + value +
         " is not one of avx512bf16, avx512, avx2, generic; ignored";
}

bool CpuIsIntel() {
  static const bool intel = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
    char vendor[13] = {};
    std::memcpy(vendor, &ebx, 4);
    std::memcpy(vendor + 4, &edx, 4);
    std::memcpy(vendor + 8, &ecx, 4);
    return std::strcmp(vendor, "GenuineIntel") == 0;
  }();
  return intel;
}

const char* CpuKernelsName(CpuKernels kernels) {
  switch (kernels) {
    case CpuKernels::kAvx512Bf16:
      return "avx512bf16";
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
