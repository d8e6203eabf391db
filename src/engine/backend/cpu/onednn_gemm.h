// gemm_mixed.h's bf16 GEMM through oneDNN's bf16 matmul: the same operands, transposes and
// semantics (inputs rounded to bf16, fp32 sums, beta * C added once, a BF16 C rounded once,
// beta 0 ignoring C). oneDNN picks its kernels by the CPU: AMX tiles where the CPU has AMX-BF16
// and the OS grants the tile state (amx_tiles.h: requested before the first call), its AVX512
// bf16 kernels (vdpbf16ps) on AVX512_BF16 CPUs (AMD Zen 4/5 included), and an emulation on
// other AVX-512 CPUs; none below AVX-512.
//
// libdnnl.so.2 (oneDNN 2.x's C API: Debian's libdnnl2) is opened at run time, not linked: 40 MB
// that every `air` process would otherwise map. A build compiled without oneDNN's headers
// (libdnnl-dev) has no such path; OneDnnMatmul() says so.
//
// Primitives are created per shape (m, n, k, leading dimensions, transposes, C type, beta) and
// cached per OneDnnGemm (a training step uses a few dozen shapes; creating one costs 0.1-1 ms);
// 256 at most, the cache emptied when full (a run with varying lengths). F32 operands (the
// mixed model's F32 gradients) are rounded to bf16 into a buffer first, on the caller's pool:
// oneDNN 2.x's matmul takes its two inputs in one type.
//
// Threads: Debian's oneDNN runs on OpenMP, beside air's ThreadPool. Each call sets the calling
// thread's OpenMP team size to the pool's thread count (1 without a pool), and runs while the
// pool is idle: the two never run at once, so the cores are never oversubscribed. OpenMP's
// threads wait passively between products (OMP_WAIT_POLICY=PASSIVE, set before libgomp loads
// unless the user set it): spinning, they kept the pool's threads off the cores.
// Determinism: the same bits for the same shape and thread count (what a training run needs:
// its thread count is fixed); oneDNN splits its sums by the thread count, so 1, 3 and 16
// threads give different bits (gemm_mixed_test.cc), as they differ from the native paths'.
// Thread safety: one call per OneDnnGemm at a time; OneDnnMatmul() is safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/backend/cpu/thread_pool.h"

namespace air::engine {

struct OneDnnStatus {
  bool usable = false;
  std::string why;  // when not usable: what is missing, and the way out
  std::string isa;  // when usable: the kernels oneDNN runs here, e.g. "brg:avx512_core_amx"
};

// Loads oneDNN once per process and creates one small bf16 matmul to learn whether (and with
// which kernels) it runs on this CPU.
const OneDnnStatus& OneDnnMatmul();

class OneDnnGemm {
 public:
  OneDnnGemm();
  ~OneDnnGemm();
  OneDnnGemm(const OneDnnGemm&) = delete;
  OneDnnGemm& operator=(const OneDnnGemm&) = delete;

  // C = op(A) op(B) + beta * C as gemm_mixed.h says; m, n, k > 0. False (nothing written)
  // when oneDNN has no matmul for this layout: the caller runs another path. Requires
  // OneDnnMatmul().usable.
  bool Gemm(ThreadPool* pool, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
            const GemmOperand& b, float beta, const GemmResult& c);

  // The implementation oneDNN picked for the last primitive created ("brg:avx512_core_amx").
  const std::string& last_impl() const { return last_impl_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::string last_impl_;
};

}  // namespace air::engine
