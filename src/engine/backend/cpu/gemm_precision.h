// What this CPU does with bf16 products: native bf16 dot-product instructions (AVX512-BF16's
// vdpbf16ps) or conversion to fp32 on load (the same results, at fp32 speed). The trainer says
// once when bf16 runs by conversion.
// Thread safety: pure functions.
#pragma once

#include <string>

namespace air::engine {

// True when the CPU (and AIR_CPU_KERNELS' cap) allows the native bf16 GEMM path.
bool CpuHasNativeBf16();
// "" when bf16 products are native; else a sentence saying they run by conversion and why.
std::string CpuBf16Note();

}  // namespace air::engine
