// The bf16 GEMM of gemm_mixed.h (same operands, transposes and semantics: inputs rounded to
// bf16, fp32 sums, a BF16 C rounded once, beta 0 ignoring C) through oneDNN's bf16 matmul
// (Debian's libdnnl 2.6), for bench/gemm to measure against air's own kernels. F32 operands
// are rounded to bf16 into a buffer first (oneDNN's matmul takes src and weights of one type);
// beta != 0 is a sum post-op. Primitives are cached by shape, layout, C type and beta.
//
// Not part of the engine, a benchmark peer like torch.mm: on the CPU measured (AMD EPYC Zen 4,
// avx512_bf16; bench/gemm/bench.py --threads 1 --clock cpu) air's kernel runs the training
// shapes at 0.9-1.1x of it, so it would add no speed, only a second thread runtime (OpenMP)
// beside the engine's ThreadPool, a conversion pass for F32 operands and about 1 ms to create
// each new shape's primitive.
//
// Threads: oneDNN's Debian build runs on OpenMP; SetThreads sets its team size (call it while
// no other parallel work runs: no oversubscription with air's ThreadPool).
// Thread safety: one call per OneDnnGemm at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend/cpu/gemm_mixed.h"

namespace air::bench {

class OneDnnGemm {
 public:
  OneDnnGemm();
  ~OneDnnGemm();
  OneDnnGemm(const OneDnnGemm&) = delete;
  OneDnnGemm& operator=(const OneDnnGemm&) = delete;

  static void SetThreads(int threads);
  // The implementation oneDNN picked for the last primitive created (e.g. "brg:avx512_core_bf16").
  const std::string& last_impl() const { return last_impl_; }

  void Gemm(int64_t m, int64_t n, int64_t k, const engine::GemmOperand& a,
            const engine::GemmOperand& b, float beta, const engine::GemmResult& c);

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::string last_impl_;
};

}  // namespace air::bench
