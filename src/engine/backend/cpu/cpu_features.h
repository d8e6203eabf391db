// Which vector kernels the fast CPU path uses: the best the CPU has (AVX-512 with the BF16
// extension, else AVX-512F, else AVX2 with FMA, else portable loops), capped by
// AIR_CPU_KERNELS=avx512bf16|avx512|avx2|generic when set. The cap is how the portable and
// AVX2 kernels are tested on an AVX-512 machine (ctest's engine_core_avx2_kernels and
// engine_core_generic_kernels) and how to compare them. The fp32 kernels are the same at
// avx512bf16 and avx512; the BF16 level adds the bf16 GEMM's vdpbf16ps kernel (gemm_mixed.h).
// Thread safety: decided once, on first use; immutable afterwards.
#pragma once

#include <string>

namespace air::engine {

enum class CpuKernels { kGeneric = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3 };

// The kernels in use: the detected level, capped by AIR_CPU_KERNELS.
CpuKernels SelectedCpuKernels();
// The best level this CPU (and OS: the AVX-512 register state) can execute, ignoring the cap;
// for tests that run every level the machine allows.
CpuKernels DetectedCpuKernels();
const char* CpuKernelsName(CpuKernels kernels);  // "generic", "avx2", "avx512", "avx512bf16"

// When AIR_CPU_KERNELS is set to something else than a kernel name (and so ignored): a message
// saying so, for the user; else "".
std::string CpuKernelsSettingProblem();

// Whether the CPU's vendor string is "GenuineIntel" (CPUID leaf 0): Intel's cores run
// vdpbf16ps at half their fp32 FMA rate (gemm_path.h's rule).
bool CpuIsIntel();

inline bool UseAvx512() { return SelectedCpuKernels() >= CpuKernels::kAvx512; }
inline bool UseAvx2() { return SelectedCpuKernels() >= CpuKernels::kAvx2; }

}  // namespace air::engine
