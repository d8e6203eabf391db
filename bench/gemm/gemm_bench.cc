// GEMM throughput of the engine's fast CPU path, for bench/gemm/bench.py: times FastOps::Gemm on
// the products a Llama training step makes (shapes given on the command line) and prints one
// JSON line per shape with GFLOP/s.
//
//   air_gemm_bench THREADS M,N,K,TRANS_A,TRANS_B [...]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "engine/ops/cpu/cpu_features.h"
#include "engine/ops/cpu/fast_ops.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s THREADS M,N,K,TRANS_A,TRANS_B [...]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  air::engine::FastOps ops(threads);
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int i = 2; i < argc; ++i) {
    long m, n, k;
    int ta, tb;
    if (std::sscanf(argv[i], "%ld,%ld,%ld,%d,%d", &m, &n, &k, &ta, &tb) != 5 || m <= 0 || n <= 0 ||
        k <= 0) {
      std::fprintf(stderr, "bad shape '%s': expected M,N,K,TRANS_A,TRANS_B\n", argv[i]);
      return 2;
    }
    air::engine::View a, b, c;
    auto a_buffer = ops.AllocateView(air::engine::DType::kF32, {m * k}, &a);
    auto b_buffer = ops.AllocateView(air::engine::DType::kF32, {k * n}, &b);
    auto c_buffer = ops.AllocateView(air::engine::DType::kF32, {m * n}, &c);
    if (!a_buffer.ok() || !b_buffer.ok() || !c_buffer.ok()) return 1;
    for (int64_t j = 0; j < a.numel(); ++j) a.f32()[j] = dist(rng);
    for (int64_t j = 0; j < b.numel(); ++j) b.f32()[j] = dist(rng);
    const long lda = ta ? m : k, ldb = tb ? k : n;
    auto run = [&] { ops.Gemm(ta, tb, m, n, k, a, lda, b, ldb, 0.0f, c, n); };
    run();  // warm-up: packing buffers, page faults
    int reps = 0;
    double seconds = 0.0;
    const auto start = std::chrono::steady_clock::now();
    while (seconds < 0.5) {
      run();
      ++reps;
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    std::printf("{\"shape\":\"%s\",\"gflops\":%.1f,\"kernels\":\"%s\"}\n", argv[i],
                2.0 * m * n * k * reps / seconds / 1e9,
                air::engine::CpuKernelsName(air::engine::SelectedCpuKernels()));
  }
  return 0;
}
