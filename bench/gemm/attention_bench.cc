// air_gemm_bench --attention: FastOps' attention forward and backward (fast_attention.cc) on a
// training shape, their causal products' GFLOP/s next to the bf16 GEMM's on a step's projection,
// windows interleaved (one JSON line per shape):
//
//   air_gemm_bench [--cpu-clock] --attention THREADS B,T,HQ,HKV,D[,bf16|f32[,WINDOW]] [...]
//       -> {"shape", "dtype", "forward_gflops", "backward_gflops", "forward_ms",
//           "backward_ms", "gemm_gflops", "gemm_shape", "path"} (the bf16 path air train takes
//           here, gemm_path.h: attention's products and the GEMM run on it)
//
// The FLOPs counted are the products' useful ones: 2 x D per visible (query, key) pair for each
// of the forward's two products (Q K^T, P V) and the backward's five (Q K^T again, dO V^T,
// dS K, dS^T Q, P^T dO), whatever the tiles compute past the causal edge. The GEMM is the bf16
// X W^T of the output projection, (B*T, HQ*D) x (HQ*D, HQ*D), C bf16, on the same threads.
// Inputs are bf16 (or f32) rows of uniform values in [-1, 1], no segments, no sinks, scale
// 1/sqrt(D); bench/train_step's 4 x 512 Llama is `4,256,8,4,64`. For a profiler,
// AIR_ATTENTION_LOOP=forward[:N] (or backward[:N]) runs N (300) calls of one and prints nothing:
//   AIR_ATTENTION_LOOP=backward perf record build/bin/air_gemm_bench --attention 1 4,256,8,4,64
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "engine/backend/cpu/fast_ops.h"
#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/backend/cpu/gemm_path.h"
#include "engine/dtype.h"

namespace air::bench {
namespace {

using namespace air::engine;

struct AttentionCase {
  AttentionShape shape;
  DType dtype = DType::kBF16;
};

// B,T,HQ,HKV,D[,bf16|f32[,WINDOW]].
bool ParseAttention(const char* text, AttentionCase& c) {
  long b = 0, t = 0, hq = 0, hkv = 0, d = 0, window = 0;
  char dtype[8] = "bf16";
  const int fields = std::sscanf(text, "%ld,%ld,%ld,%ld,%ld,%4[a-z0-9],%ld", &b, &t, &hq, &hkv, &d,
                                 dtype, &window);
  const bool dtype_ok = std::string(dtype) == "bf16" || std::string(dtype) == "f32";
  if (fields < 5 || !dtype_ok || b <= 0 || t <= 0 || hq <= 0 || hkv <= 0 || d <= 0 ||
      hq % hkv != 0 || window < 0) {
    std::fprintf(stderr, "bad attention shape '%s': expected B,T,HQ,HKV,D[,bf16|f32[,WINDOW]]\n",
                 text);
    return false;
  }
  AttentionShape& s = c.shape;
  s.batch = b;
  s.q_len = s.kv_len = t;
  s.q_heads = hq;
  s.kv_heads = hkv;
  s.head_dim = d;
  s.sliding_window = window;
  s.scale = 1.0f / std::sqrt(static_cast<float>(d));
  c.dtype = std::string(dtype) == "bf16" ? DType::kBF16 : DType::kF32;
  return true;
}

// The visible (query, key) pairs of one (batch row, head): causal, within the window.
double VisiblePairs(const AttentionShape& s) {
  double pairs = 0.0;
  for (int64_t i = 0; i < s.q_len; ++i) {
    const int64_t keys = i + 1;
    pairs += static_cast<double>(s.sliding_window > 0 ? std::min(keys, s.sliding_window) : keys);
  }
  return pairs;
}

struct Arrays {
  std::vector<std::unique_ptr<Buffer>> buffers;
  View Make(const FastOps& ops, DType dtype, int64_t n, std::mt19937* rng) {
    View view;
    auto buffer = ops.AllocateView(dtype, {n}, &view);
    if (!buffer.ok()) return View();
    buffers.push_back(std::move(*buffer));
    std::vector<float> values(static_cast<size_t>(n), 0.0f);
    if (rng != nullptr) {
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (float& x : values) x = dist(*rng);
    }
    ops.FromHostTensor(view, values.data());
    return view;
  }
};

int RunAttention(const Clock& clock, int threads, const AttentionCase& c, const char* text) {
  const AttentionShape& s = c.shape;
  // The path `air train` takes on this CPU (gemm_path.h; AIR_CPU_PATH forces it): attention's
  // bf16 products and tiles follow it (FastOps::native_bf16_path).
  const air::Result<GemmPathChoice> chosen = ChooseGemmBf16Path();
  if (!chosen.ok()) {
    std::fprintf(stderr, "%s\n", chosen.status().message().c_str());
    return 2;
  }
  FastOps ops(threads, chosen->path);
  std::mt19937 rng(0);
  Arrays arrays;
  const int64_t q_size = s.batch * s.q_len * s.q_heads * s.head_dim;
  const int64_t kv_size = s.batch * s.kv_len * s.kv_heads * s.head_dim;
  const View q = arrays.Make(ops, c.dtype, q_size, &rng);
  const View k = arrays.Make(ops, c.dtype, kv_size, &rng);
  const View v = arrays.Make(ops, c.dtype, kv_size, &rng);
  const View dout = arrays.Make(ops, c.dtype, q_size, &rng);
  const View out = arrays.Make(ops, c.dtype, q_size, nullptr);
  const View lse = arrays.Make(ops, DType::kF32, s.batch * s.q_heads * s.q_len, nullptr);
  const View dq = arrays.Make(ops, c.dtype, q_size, nullptr);
  const View dk = arrays.Make(ops, c.dtype, kv_size, nullptr);
  const View dv = arrays.Make(ops, c.dtype, kv_size, nullptr);
  if (q.empty() || lse.empty() || dv.empty()) {
    std::fprintf(stderr, "out of memory for '%s'\n", text);
    return 1;
  }
  // The projection GEMM: bf16 A (tokens, model) and W (model, model), C bf16.
  const int64_t rows = s.batch * s.q_len, model = s.q_heads * s.head_dim;
  std::vector<uint16_t> x(static_cast<size_t>(rows * model), 0x3f80);
  std::vector<uint16_t> w(static_cast<size_t>(model * model), 0x3c00);
  std::vector<uint16_t> y(static_cast<size_t>(rows * model));
  ThreadPool pool(threads);
  GemmBf16Scratch scratch;

  ops.AttentionForward(s, q, k, v, View(), View(), View(), out, lse);
  const std::vector<std::function<void()>> runs = {
      [&] { ops.AttentionForward(s, q, k, v, View(), View(), View(), out, lse); },
      [&] {
        ops.AttentionBackward(s, q, k, v, View(), View(), View(), out, lse, dout, dq, dk, dv,
                              View());
      },
      [&] {
        GemmBf16OnPath(chosen->path, &pool, scratch, rows, model, model,
                       {x.data(), true, model, false}, {w.data(), true, model, true}, 0.0f,
                       {y.data(), true, model});
      }};
  // Calls per second of each (GFLOP/s of a "call" of 1e9 FLOPs).
  if (const char* loop = std::getenv("AIR_ATTENTION_LOOP")) {  // for a profiler: no timing
    const bool backward = std::string(loop).rfind("backward", 0) == 0;
    const char* count = std::strchr(loop, ':');
    for (int i = 0, n = count ? std::atoi(count + 1) : 300; i < n; ++i) runs[backward ? 1 : 0]();
    return 0;
  }
  const std::vector<double> rate = BestGflopsInterleaved(clock, 1e9, runs);
  const double products = 2.0 * static_cast<double>(s.head_dim) * VisiblePairs(s) *
                          static_cast<double>(s.batch * s.q_heads);
  const double gemm_flops = 2.0 * static_cast<double>(rows * model * model);
  std::printf(
      "{\"shape\":\"%s\",\"dtype\":\"%s\",\"forward_gflops\":%.1f,\"backward_gflops\":%.1f,"
      "\"forward_ms\":%.3f,\"backward_ms\":%.3f,\"gemm_gflops\":%.1f,"
      "\"gemm_shape\":\"%lld,%lld,%lld\",\"path\":\"%s\"}\n",
      text, DTypeName(c.dtype), 2 * products * rate[0] / 1e9, 5 * products * rate[1] / 1e9,
      1e3 / rate[0], 1e3 / rate[1], gemm_flops * rate[2] / 1e9, static_cast<long long>(rows),
      static_cast<long long>(model), static_cast<long long>(model), GemmBf16PathName(chosen->path));
  std::fflush(stdout);
  return 0;
}

}  // namespace

int AttentionMode(const Clock& clock, int threads, int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    AttentionCase c;
    if (!ParseAttention(argv[i], c)) return 2;
    if (const int rc = RunAttention(clock, threads, c, argv[i]); rc != 0) return rc;
  }
  return 0;
}

}  // namespace air::bench
