// GEMM throughput of the engine's fast CPU path, for bench/gemm/bench.py; one JSON line per
// shape (or one for the peaks).
//
//   air_gemm_bench THREADS M,N,K,TRANS_A,TRANS_B [...]
//       fp32: FastOps::Gemm -> {"shape", "gflops", "kernels"}
//   air_gemm_bench --bf16 THREADS M,N,K,TRANS_A,TRANS_B,C,BETA[,A,B] [...]  (each bf16 or f32;
//       A and B bf16 unless given: LoRA's products have an fp32 side)
//       the bf16 GEMM on each path measured (onednn, avx512bf16, avx512 and the
//       kernel level's where this CPU runs them, and the one gemm_path.h chooses:
//       AIR_CPU_PATH forces it) and, for the ratio, air's fp32 FastGemm on the same values,
//       each C = op(A) op(B) + BETA * C, their windows interleaved
//       -> {"shape", "air" (the chosen path), "onednn", "air_f32", "path" (chosen), "reason",
//           "onednn_impl", "paths": {name: GFLOP/s}} (GFLOP/s)
//   air_gemm_bench --peak THREADS
//       register-only vdpbf16ps and fp32 FMA loops on every thread -> {"bf16", "f32"} (GFLOP/s;
//       bf16 0 where the CPU has no AVX512_BF16)
//   air_gemm_bench --attention THREADS B,T,HQ,HKV,D[,bf16|f32[,WINDOW]] [...]
//       FastOps' attention forward and backward beside the bf16 GEMM (attention_bench.cc)
//   air_gemm_bench --rowwise THREADS [TOKENS,HIDDEN,MLP,bf16|f32]
//       the step's row-wise ops (SwiGLU, RMSNorm, AddInPlace, Convert, SumOfSquares) on
//       FastOps: one JSON line per op {"op", "dtype", "elements", "us", "gelem_s"}
//       (rowwise_bench.cc; default 1024,512,1344,bf16: bench/train_step's 4 x 512 step)
// Each figure is the best of three 0.25 s windows after a warm-up call (other load on the
// machine only ever slows a window down); --cpu-clock (one thread only) times the windows in
// the thread's CPU time instead of the wall clock, for a machine that other work keeps busy;
// --cold empties the caches before each timed call (bench_timing.h), as the operands of a
// call inside a training step are: LoRA's rank-16 products run at less than half their warm
// speed there.
#include <immintrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/fast_gemm.h"
#include "engine/backend/cpu/fast_ops.h"
#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/backend/cpu/gemm_path.h"
#include "engine/backend/cpu/onednn_gemm.h"
#include "engine/dtype.h"

namespace {

using namespace air::engine;
using air::bench::BestGflops;
using air::bench::BestGflopsInterleaved;
using air::bench::Clock;

struct Shape {
  long m, n, k;
  int ta, tb;
  bool c_bf16;
  float beta;
  bool a_bf16 = true, b_bf16 = true;  // with_c's optional ,A,B operand types (LoRA's fp32 sides)
};

// M,N,K,TRANS_A,TRANS_B, and with_c: ,C,BETA[,A,B] (each bf16 or f32; A and B default bf16).
bool ParseShape(const char* text, bool with_c, Shape& s) {
  char c_type[8] = "", a_type[8] = "bf16", b_type[8] = "bf16";
  s.beta = 0.0f;
  const int fields =
      with_c ? std::sscanf(text, "%ld,%ld,%ld,%d,%d,%4[a-z0-9],%f,%4[a-z0-9],%4[a-z0-9]", &s.m,
                           &s.n, &s.k, &s.ta, &s.tb, c_type, &s.beta, a_type, b_type)
             : std::sscanf(text, "%ld,%ld,%ld,%d,%d", &s.m, &s.n, &s.k, &s.ta, &s.tb);
  const auto is_type = [](const char* t) {
    return std::strcmp(t, "bf16") == 0 || std::strcmp(t, "f32") == 0;
  };
  s.c_bf16 = std::strcmp(c_type, "bf16") == 0;
  s.a_bf16 = std::strcmp(a_type, "bf16") == 0;
  s.b_bf16 = std::strcmp(b_type, "bf16") == 0;
  const bool types_ok = !with_c || (is_type(c_type) && is_type(a_type) && is_type(b_type));
  const bool count_ok = with_c ? (fields == 7 || fields == 9) : fields == 5;
  if (count_ok && types_ok && s.m > 0 && s.n > 0 && s.k > 0) return true;
  std::fprintf(stderr, "bad shape '%s': expected M,N,K,TRANS_A,TRANS_B%s\n", text,
               with_c ? ",bf16|f32,BETA[,bf16|f32,bf16|f32]" : "");
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

// The bf16 GEMM's paths measured: onednn, avx512bf16, avx512 (bf16 storage, fp32 FMA math) and
// the kernel level's where this CPU runs them, and the chosen one (gemm_path.h); avx2 and
// generic only when chosen or the level's (the generic loops take seconds on large shapes).
std::vector<GemmBf16Path> MeasuredPaths(GemmBf16Path chosen) {
  std::vector<GemmBf16Path> paths;
  for (GemmBf16Path p : AllGemmBf16Paths()) {
    const bool wanted = p == chosen || p == GemmBf16Path::kOneDnn ||
                        p == GemmBf16Path::kAvx512Bf16 || p == GemmBf16Path::kAvx512 ||
                        p == SelectedGemmBf16Path();
    if (wanted && GemmBf16PathRuns(p, nullptr)) paths.push_back(p);
  }
  return paths;
}

int Bf16(const Clock& clock, int threads, int argc, char** argv) {
  const air::Result<GemmPathChoice> chosen = ChooseGemmBf16Path();
  if (!chosen.ok()) {
    std::fprintf(stderr, "%s\n", chosen.status().message().c_str());
    return 2;
  }
  const std::vector<GemmBf16Path> paths = MeasuredPaths(chosen->path);
  ThreadPool pool(threads);
  FastOps ops(threads, chosen->path);  // the route a training step takes (FastOps::Gemm)
  std::vector<GemmBf16Scratch> scratch(paths.size());
  GemmScratch f32_scratch;
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
    const GemmOperand ga{s.a_bf16 ? static_cast<const void*>(a.data()) : a32.data(), s.a_bf16, lda,
                         s.ta != 0};
    const GemmOperand gb{s.b_bf16 ? static_cast<const void*>(b.data()) : b32.data(), s.b_bf16, ldb,
                         s.tb != 0};
    const GemmResult gc{s.c_bf16 ? static_cast<void*>(c16.data()) : c32.data(), s.c_bf16, s.n};
    // Every path, then air's fp32 GEMM on the same values, window by window in turn.
    std::vector<std::function<void()>> runs;
    for (size_t p = 0; p < paths.size(); ++p) {
      runs.push_back([&, p] {
        GemmBf16OnPath(paths[p], &pool, scratch[p], s.m, s.n, s.k, ga, gb, s.beta, gc);
      });
    }
    // FastOps::Gemm on the same operands: the chosen path, or the narrow GEMM where it takes
    // the product (gemm_narrow.h).
    View va, vb, vc;
    auto va_buffer = ops.AllocateView(s.a_bf16 ? DType::kBF16 : DType::kF32, {s.m * s.k}, &va);
    auto vb_buffer = ops.AllocateView(s.b_bf16 ? DType::kBF16 : DType::kF32, {s.k * s.n}, &vb);
    auto vc_buffer = ops.AllocateView(s.c_bf16 ? DType::kBF16 : DType::kF32, {s.m * s.n}, &vc);
    if (!va_buffer.ok() || !vb_buffer.ok() || !vc_buffer.ok()) return 1;
    std::memcpy(va.raw(), ga.data, va.bytes());
    std::memcpy(vb.raw(), gb.data, vb.bytes());
    std::memset(vc.raw(), 0, vc.bytes());  // BETA != 0 reads C
    runs.push_back([&] { ops.Gemm(s.ta, s.tb, s.m, s.n, s.k, va, lda, vb, ldb, s.beta, vc, s.n); });
    runs.push_back([&] {
      FastGemm(pool, f32_scratch, s.ta, s.tb, s.m, s.n, s.k, a32.data(), lda, b32.data(), ldb,
               s.beta, c32.data(), s.n);
    });
    const std::vector<double> gflops = BestGflopsInterleaved(clock, 2.0 * s.m * s.n * s.k, runs);
    std::string by_path, onednn = "null", impl;
    double air = 0.0;
    for (size_t p = 0; p < paths.size(); ++p) {
      char text[64];
      std::snprintf(text, sizeof text, "%s\"%s\":%.1f", p == 0 ? "" : ",",
                    GemmBf16PathName(paths[p]), gflops[p]);
      by_path += text;
      if (paths[p] == chosen->path) air = gflops[p];
      if (paths[p] == GemmBf16Path::kOneDnn) {
        std::snprintf(text, sizeof text, "%.1f", gflops[p]);
        onednn = text;
        impl = scratch[p].onednn != nullptr ? scratch[p].onednn->last_impl() : "";
      }
    }
    if (impl.empty()) impl = std::string("not run: ") + OneDnnMatmul().why;
    std::printf(
        "{\"shape\":\"%s\",\"air\":%.1f,\"fastops\":%.1f,\"onednn\":%s,\"air_f32\":%.1f,"
        "\"path\":\"%s\",\"reason\":\"%s\",\"onednn_impl\":\"%s\",\"paths\":{%s}}\n",
        argv[i], air, gflops[paths.size()], onednn.c_str(), gflops.back(),
        GemmBf16PathName(chosen->path), chosen->reason.c_str(), impl.c_str(), by_path.c_str());
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
  bool cpu_clock = false, cold = false;  // leading options, in either order
  while (argc > 1 && (std::string(argv[1]) == "--cpu-clock" || std::string(argv[1]) == "--cold")) {
    (std::string(argv[1]) == "--cold" ? cold : cpu_clock) = true;
    argv[1] = argv[0];
    --argc;
    ++argv;
  }
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool rowwise = mode == "--rowwise";
  const int first =
      mode == "--bf16" || mode == "--peak" || mode == "--attention" || rowwise ? 2 : 1;
  if (argc <= first || (mode != "--peak" && !rowwise && argc <= first + 1)) {
    std::fprintf(
        stderr,
        "usage: %s [OPTIONS] THREADS M,N,K,TRANS_A,TRANS_B [...]\n"
        "       %s [OPTIONS] --bf16 THREADS M,N,K,TRANS_A,TRANS_B,bf16|f32,BETA[,A,B] [...]\n"
        "       %s [OPTIONS] --peak THREADS\n"
        "       %s [OPTIONS] --attention THREADS B,T,HQ,HKV,D[,bf16|f32[,WINDOW]] [...]\n"
        "       %s [OPTIONS] --rowwise THREADS [TOKENS,HIDDEN,MLP,bf16|f32]\n"
        "OPTIONS: --cpu-clock (THREADS 1: the thread's CPU time), --cold (caches emptied "
        "before each call)\n",
        argv[0], argv[0], argv[0], argv[0], argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[first]);
  if (threads <= 0 || (cpu_clock && threads != 1)) {
    std::fprintf(stderr, "THREADS must be a positive integer (1 with --cpu-clock), got '%s'\n",
                 argv[first]);
    return 2;
  }
  const Clock clock{cpu_clock, cold};
  if (mode == "--peak") return Peak(clock, threads);
  if (mode == "--attention") {
    return air::bench::AttentionMode(clock, threads, argc - first - 1, argv + first + 1);
  }
  if (rowwise) return air::bench::Rowwise(clock, threads, argc - first - 1, argv + first + 1);
  if (mode == "--bf16") return Bf16(clock, threads, argc - first - 1, argv + first + 1);
  return Fp32(clock, threads, argc - first - 1, argv + first + 1);
}
