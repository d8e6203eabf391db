// Which vector kernels the fast CPU path uses: the best the CPU has (AVX-512F, else AVX2 with
// FMA, else portable loops), capped by AIR_CPU_KERNELS=avx512|avx2|generic when set. The cap
// is how the portable and AVX2 kernels are tested on an AVX-512 machine (ctest's
// engine_core_avx2_kernels and engine_core_generic_kernels) and how to compare them.
// Thread safety: decided once, on first use; immutable afterwards.
#pragma once

#include <string>

namespace air::engine {

enum class CpuKernels { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };

CpuKernels SelectedCpuKernels();
const char* CpuKernelsName(CpuKernels kernels);  // "generic", "avx2", "avx512"

// When AIR_CPU_KERNELS is set to something else than avx512, avx2 or generic (and so ignored):
// a message saying so, for the user; else "".
std::string CpuKernelsSettingProblem();

inline bool UseAvx512() { return SelectedCpuKernels() == CpuKernels::kAvx512; }
inline bool UseAvx2() { return SelectedCpuKernels() >= CpuKernels::kAvx2; }

}  // namespace air::engine
