// GEMM throughput of the engine's fast CPU path, for bench/gemm/bench.py; one JSON line per
// shape (or one for the peaks).
//
//   air_gemm_bench THREADS M,N,K,TRANS_A,TRANS_B [...]
//       fp32: FastOps::Gemm -> {"shape", "gflops", "kernels"}
//   air_gemm_bench --bf16 THREADS M,N,K,TRANS_A,TRANS_B,C,BETA [...]    (C: bf16 or f32)
//       A and B bf16: air's GemmBf16 (its selected path), oneDNN's bf16 matmul
//       (onednn_gemm.h) and, for the ratio, air's fp32 FastGemm on the same values, each
//       C = op(A) op(B) + BETA * C
//       -> {"shape", "air", "onednn", "air_f32", "path", "onednn_impl"} (GFLOP/s)
//   air_gemm_bench --peak THREADS
//       register-only vdpbf16ps and fp32 FMA loops on every thread -> {"bf16", "f32"} (GFLOP/s;
//       bf16 0 where the CPU has no AVX512_BF16)
// Each figure is the best of three 0.25 s windows after a warm-up call (other load on the
// machine only ever slows a window down); --cpu-clock (one thread only) times the windows in
// the thread's CPU time instead of the wall clock, for a machine that other work keeps busy.
#include <immintrin.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/fast_gemm.h"
#include "engine/backend/cpu/fast_ops.h"
#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/dtype.h"
#include "onednn_gemm.h"

namespace {

using namespace air::engine;

// The clock the figures are taken on: the wall clock, or with one thread (--cpu-clock) the
// thread's CPU time, which other load on the machine does not inflate.
struct Clock {
  bool cpu_time;
  double Now() const {
    if (!cpu_time) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    }
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
};

double BestGflops(const Clock& clock, double flops, const std::function<void()>& run) {
  run();  // warm-up: packing buffers, page faults, primitive creation
  double best = 0.0;
  for (int window = 0; window < 3; ++window) {
    int reps = 0;
    double seconds = 0.0;
    const double start = clock.Now();
    while (seconds < 0.25) {
      run();
      ++reps;
      seconds = clock.Now() - start;
    }
    best = std::max(best, flops * reps / seconds / 1e9);
  }
  return best;
}

struct Shape {
  long m, n, k;
  int ta, tb;
  bool c_bf16;
  float beta;
};

// M,N,K,TRANS_A,TRANS_B, and with_c: ,C,BETA (C bf16 or f32).
bool ParseShape(const char* text, bool with_c, Shape& s) {
  char c_type[8] = "";
  s.beta = 0.0f;
  const int fields = with_c
                         ? std::sscanf(text, "%ld,%ld,%ld,%d,%d,%4[a-z0-9],%f", &s.m, &s.n, &s.k,
                                       &s.ta, &s.tb, c_type, &s.beta)
                         : std::sscanf(text, "%ld,%ld,%ld,%d,%d", &s.m, &s.n, &s.k, &s.ta, &s.tb);
  s.c_bf16 = std::strcmp(c_type, "bf16") == 0;
  const bool c_ok = !with_c || s.c_bf16 || std::strcmp(c_type, "f32") == 0;
  if (fields == (with_c ? 7 : 5) && c_ok && s.m > 0 && s.n > 0 && s.k > 0) return true;
  std::fprintf(stderr, "bad shape '%s': expected M,N,K,TRANS_A,TRANS_B%s\n", text,
               with_c ? ",bf16|f32,BETA" : "");
  return false;
}

std::vector<float> RandomFloats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

int Fp32(const Clock& clock, int threads, int argc, char** argv) {
  FastOps ops(threads);
  std::mt19937 rng(0);
  for (int i = 0; i < argc; ++i) {
    Shape s;
    if (!ParseShape(argv[i], false, s)) return 2;
    View a, b, c;
    auto a_buffer = ops.AllocateView(DType::kF32, {s.m * s.k}, &a);
    auto b_buffer = ops.AllocateView(DType::kF32, {s.k * s.n}, &b);
    auto c_buffer = ops.AllocateView(DType::kF32, {s.m * s.n}, &c);
    if (!a_buffer.ok() || !b_buffer.ok() || !c_buffer.ok()) return 1;
    const std::vector<float> a_values = RandomFloats(static_cast<size_t>(a.numel()), rng);
    const std::vector<float> b_values = RandomFloats(static_cast<size_t>(b.numel()), rng);
    std::copy(a_values.begin(), a_values.end(), a.f32());
    std::copy(b_values.begin(), b_values.end(), b.f32());
    const long lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    const double gflops = BestGflops(clock, 2.0 * s.m * s.n * s.k, [&] {
      ops.Gemm(s.ta, s.tb, s.m, s.n, s.k, a, lda, b, ldb, 0.0f, c, s.n);
    });
    std::printf("{\"shape\":\"%s\",\"gflops\":%.1f,\"kernels\":\"%s\"}\n", argv[i], gflops,
                CpuKernelsName(SelectedCpuKernels()));
  }
  return 0;
}

int Bf16(const Clock& clock, int threads, int argc, char** argv) {
  ThreadPool pool(threads);
  GemmBf16Scratch scratch;
  GemmScratch f32_scratch;
  air::bench::OneDnnGemm onednn;
  std::mt19937 rng(0);
  for (int i = 0; i < argc; ++i) {
    Shape s;
    if (!ParseShape(argv[i], true, s)) return 2;
    const std::vector<float> a32 = RandomFloats(static_cast<size_t>(s.m * s.k), rng);
    const std::vector<float> b32 = RandomFloats(static_cast<size_t>(s.k * s.n), rng);
    std::vector<uint16_t> a(a32.size()), b(b32.size());
    EncodeFromF32(DType::kBF16, a32.data(), a32.size(), a.data());
    EncodeFromF32(DType::kBF16, b32.data(), b32.size(), b.data());
    std::vector<float> c32(static_cast<size_t>(s.m * s.n));
    std::vector<uint16_t> c16(c32.size());
    const long lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    const GemmOperand ga{a.data(), true, lda, s.ta != 0}, gb{b.data(), true, ldb, s.tb != 0};
    const GemmResult gc{s.c_bf16 ? static_cast<void*>(c16.data()) : c32.data(), s.c_bf16, s.n};
    const double flops = 2.0 * s.m * s.n * s.k;
    const double air = BestGflops(
        clock, flops, [&] { GemmBf16(pool, scratch, s.m, s.n, s.k, ga, gb, s.beta, gc); });
    const double air_f32 = BestGflops(clock, flops, [&] {
      FastGemm(pool, f32_scratch, s.ta, s.tb, s.m, s.n, s.k, a32.data(), lda, b32.data(), ldb,
               s.beta, c32.data(), s.n);
    });
    air::bench::OneDnnGemm::SetThreads(threads);  // air's pool is idle meanwhile
    // oneDNN has no bf16 matmul below AVX-512 (ONEDNN_MAX_CPU_ISA=AVX2, an AVX2-only CPU): its
    // column is then null, with the reason, and air's are still measured.
    std::string dnnl = "null", impl;
    try {
      char text[32];
      std::snprintf(text, sizeof text, "%.1f", BestGflops(clock, flops, [&] {
                      onednn.Gemm(s.m, s.n, s.k, ga, gb, s.beta, gc);
                    }));
      dnnl = text;
      impl = onednn.last_impl();
    } catch (const std::exception& e) {
      impl = std::string("none on this ISA (") + e.what() + ")";
    }
    std::printf(
        "{\"shape\":\"%s\",\"air\":%.1f,\"onednn\":%s,\"air_f32\":%.1f,\"path\":\"%s\","
        "\"onednn_impl\":\"%s\"}\n",
        argv[i], air, dnnl.c_str(), air_f32, GemmBf16PathName(SelectedGemmBf16Path()),
        impl.c_str());
    std::fflush(stdout);
  }
  return 0;
}

// kAccumulators independent accumulators per loop, more than latency x throughput on current
// cores (Zen 5's vdpbf16ps needs more than 12: with 12 one core measured 460-470 GFLOP/s, with
// 16 or 24 505-515), so each loop runs at its unit's throughput: `iterations` x kAccumulators
// instructions per call. The empty asm keeps every accumulator live without a memory access.
// The AVX2 loop keeps 12: without AVX-512 there are only 16 vector registers.
constexpr int kAccumulators = 24;
constexpr int kAvx2Accumulators = 12;
__attribute__((target("avx512f,avx512bf16"))) void Bf16Loop(long iterations) {
  __m512 acc[kAccumulators];
  for (__m512& v : acc) v = _mm512_setzero_ps();
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (__m512& v : acc) __asm__ volatile("" : "+v"(v = _mm512_dpbf16_ps(v, x, x)));
  }
}

__attribute__((target("avx512f,fma"))) void Fp32Loop512(long iterations) {
  __m512 acc[kAccumulators];
  for (__m512& v : acc) v = _mm512_setzero_ps();
  const __m512 x = _mm512_set1_ps(1e-9f);
  for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (__m512& v : acc) __asm__ volatile("" : "+v"(v = _mm512_fmadd_ps(x, x, v)));
  }
}

__attribute__((target("avx2,fma"))) void Fp32Loop256(long iterations) {
  __m256 acc[kAvx2Accumulators];
  for (__m256& v : acc) v = _mm256_setzero_ps();
  const __m256 x = _mm256_set1_ps(1e-9f);
  for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (__m256& v : acc) __asm__ volatile("" : "+x"(v = _mm256_fmadd_ps(x, x, v)));
  }
}

int Peak(const Clock& clock, int threads) {
  ThreadPool pool(threads);
  constexpr long kIterations = 200000;
  auto on_all = [&](void (*loop)(long)) {
    pool.ParallelFor(threads, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t) loop(kIterations);
    });
  };
  const CpuKernels cpu = DetectedCpuKernels();
  const double per_round = double{kAccumulators} * kIterations * threads;  // instructions
  const double bf16 = cpu >= CpuKernels::kAvx512Bf16
                          ? BestGflops(clock, per_round * 64, [&] { on_all(Bf16Loop); })
                          : 0.0;
  double f32 = 0.0;
  if (cpu >= CpuKernels::kAvx512) {
    f32 = BestGflops(clock, per_round * 32, [&] { on_all(Fp32Loop512); });
  } else if (cpu >= CpuKernels::kAvx2) {
    f32 = BestGflops(clock, per_round / kAccumulators * kAvx2Accumulators * 16,
                     [&] { on_all(Fp32Loop256); });
  }
  std::printf("{\"bf16\":%.1f,\"f32\":%.1f}\n", bf16, f32);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool cpu_clock = argc > 1 && std::string(argv[1]) == "--cpu-clock";
  const int shift = cpu_clock ? 1 : 0;
  argc -= shift;
  argv += shift;
  const std::string mode = argc > 1 ? argv[1] : "";
  const int first = mode == "--bf16" || mode == "--peak" ? 2 : 1;
  if (argc <= first || (mode != "--peak" && argc <= first + 1)) {
    std::fprintf(
        stderr,
        "usage: %s [--cpu-clock] THREADS M,N,K,TRANS_A,TRANS_B [...]\n"
        "       %s [--cpu-clock] --bf16 THREADS M,N,K,TRANS_A,TRANS_B,bf16|f32,BETA [...]\n"
        "       %s [--cpu-clock] --peak THREADS\n",
        argv[0], argv[0], argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[first]);
  if (threads <= 0 || (cpu_clock && threads != 1)) {
    std::fprintf(stderr, "THREADS must be a positive integer (1 with --cpu-clock), got '%s'\n",
                 argv[first]);
    return 2;
  }
  const Clock clock{cpu_clock};
  if (mode == "--peak") return Peak(clock, threads);
  if (mode == "--bf16") return Bf16(clock, threads, argc - first - 1, argv + first + 1);
  return Fp32(clock, threads, argc - first - 1, argv + first + 1);
}
