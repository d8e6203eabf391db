// Whether this CPU can run AMX bf16 tile instructions (Intel Sapphire Rapids and later): the
// CPU reports AMX-TILE and AMX-BF16 (CPUID leaf 7, EDX bits 24 and 22), the OS enables the tile
// state in XCR0 (bits 17 and 18), and Linux grants this process the tile data state, which it
// must request before the first tile instruction (arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA), Linux 5.16+; without it the first tile load is SIGILL). Used by the
// choice of the bf16 GEMM's path (gemm_path.h): oneDNN's matmul runs its AMX kernels only here.
// Thread safety: probed (and the permission requested) once per process, on first call; the
// permission is the process's, so every thread may use the tiles after it.
#pragma once

#include <string>

namespace air::engine {

struct AmxSupport {
  bool usable = false;
  // Why not, when not: "the CPU has no AMX-BF16", "the OS refused the tile state: ...".
  std::string why;
};

// Probes and, where the CPU has AMX, requests the tile state for this process (once).
const AmxSupport& AmxBf16Support();

}  // namespace air::engine
