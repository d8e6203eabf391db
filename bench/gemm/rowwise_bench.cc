// air_gemm_bench --rowwise: the row-wise and elementwise ops of a training step on FastOps, each
// timed as one call over the step's activations (TOKENS x HIDDEN for the norms and residual
// adds and LoRA's dropout of an adapter's input and its rank-16 products of the dropped input,
// fused and as their definitions; TOKENS x MLP for SwiGLU, the conversions, the sum of squares
// and LoRA's forward on the gate projection, its branch folded into the base product or not),
// the ops' windows interleaved (bench_timing.h). With --cpu-clock on one thread the figures are the
// thread's CPU time, which a busy machine does not inflate: before/after comparisons of these
// kernels.
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/fast_ops.h"
#include "engine/check.h"

namespace air::bench {
namespace {

using namespace air::engine;

// Views of the backend's memory, filled with values in [-1, 1), kept alive with the object.
class Arrays {
 public:
  explicit Arrays(const Backend& backend) : backend_(backend) {}
  View Allocate(DType dtype, Shape shape) {
    View view;
    auto buffer = backend_.AllocateView(dtype, shape, &view);
    AIR_ENGINE_CHECK(buffer.ok(), "allocation failed");
    buffers_.push_back(std::move(buffer).value());
    return view;
  }
  View Random(DType dtype, Shape shape) {
    const View view = Allocate(dtype, std::move(shape));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> host(static_cast<size_t>(view.numel()));
    for (float& x : host) x = dist(rng_);
    backend_.FromHostTensor(view, host.data());
    return view;
  }

 private:
  const Backend& backend_;
  std::mt19937 rng_{0};
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

struct Op {
  std::string name;
  int64_t elements;
  std::function<void()> run;
};

}  // namespace

int Rowwise(const Clock& clock, int threads, int argc, char** argv) {
  long tokens = 1024, hidden = 512, mlp = 1344;
  char type[8] = "bf16";
  if (argc > 0 &&
      (std::sscanf(argv[0], "%ld,%ld,%ld,%4[a-z0-9]", &tokens, &hidden, &mlp, type) != 4 ||
       tokens <= 0 || hidden <= 0 || mlp <= 0 ||
       (std::string(type) != "bf16" && std::string(type) != "f32"))) {
    std::fprintf(stderr, "bad shape '%s': expected TOKENS,HIDDEN,MLP,bf16|f32\n", argv[0]);
    return 2;
  }
  const DType dtype = std::string(type) == "bf16" ? DType::kBF16 : DType::kF32;
  const FastOps ops(threads);
  Arrays a(ops);
  const View gate = a.Random(dtype, {tokens, mlp}), up = a.Random(dtype, {tokens, mlp});
  const View out = a.Random(dtype, {tokens, mlp}), dgate = a.Random(dtype, {tokens, mlp});
  const View dup = a.Random(dtype, {tokens, mlp});
  const View x = a.Random(dtype, {tokens, hidden}), dy = a.Random(dtype, {tokens, hidden});
  const View y = a.Random(dtype, {tokens, hidden}), dx = a.Random(dtype, {tokens, hidden});
  const View w = a.Random(dtype, {hidden}), dw = a.Random(dtype, {hidden});
  const View rstd = a.Random(DType::kF32, {tokens});
  const View wide32 = a.Random(DType::kF32, {tokens, mlp}),
             wide16 = a.Random(DType::kBF16, {tokens, mlp});
  const View sum = a.Allocate(DType::kF64, {1});
  const int64_t wide = tokens * mlp, narrow = tokens * hidden;
  // LoRA's dropout (p 0.05) of one adapter's input x: drawn (Dropout), or its mask drawn once
  // (DropoutMask) and applied to x and to the fp32 input gradient (ApplyDropoutMask).
  const View bits = a.Allocate(DType::kU8, {(narrow + 7) / 8});
  const View x_grad32 = a.Random(DType::kF32, {tokens, hidden}),
             dx32 = a.Random(DType::kF32, {tokens, hidden});
  ops.DropoutMask(narrow, 0.05f, 7, bits);
  // LoRA's rank-16 products of the dropped input, fused (GemmDropped, GemmAddDropped; both of the
  // backward's in one pass: DroppedLinearBackward) and as their definitions (ApplyDropoutMask
  // into a scratch, then Gemm; Gemm, then ApplyDropoutMask; the two ops).
  const int64_t r = 16;
  const View lora_a = a.Random(dtype, {r, hidden}), u = a.Random(DType::kF32, {tokens, r});
  const View du = a.Random(DType::kF32, {tokens, r}), da = a.Random(DType::kF32, {r, hidden});
  // LoRA's forward on the gate projection: y = x W^T + u B^T in one product (GemmConcatK), or the
  // base product then the rank-16 update adding into y (the unfolded branch).
  const View w_gate = a.Random(dtype, {mlp, hidden}), lora_b = a.Random(DType::kF32, {mlp, r});
  const View u_kept = a.Random(dtype, {tokens, r}), row_scratch = a.Random(DType::kF32, {mlp});
  const std::vector<Op> measured = {
      {"SwigluForward", wide, [&] { ops.SwigluForward(gate, up, out); }},
      {"SwigluBackward", wide, [&] { ops.SwigluBackward(gate, up, out, dgate, dup); }},
      {"AddInPlace", narrow, [&] { ops.AddInPlace(y, x); }},
      {"RmsNormForward", narrow, [&] { ops.RmsNormForward(x, w, 1e-5f, y, rstd); }},
      {"RmsNormBackward", narrow, [&] { ops.RmsNormBackward(x, w, rstd, dy, dx, dw); }},
      {"SumOfSquares", wide, [&] { ops.SumOfSquares(gate, sum); }},
      {"Convert f32->bf16", wide, [&] { ops.Convert(wide32, wide16); }},
      {"Convert bf16->f32", wide, [&] { ops.Convert(wide16, wide32); }},
      {"Dropout", narrow, [&] { ops.Dropout(x, 0.05f, 7, y); }},
      {"Dropout f32 in place", narrow, [&] { ops.Dropout(x_grad32, 0.05f, 7, x_grad32); }},
      {"DropoutMask", narrow, [&] { ops.DropoutMask(narrow, 0.05f, 7, bits); }},
      {"ApplyDropoutMask", narrow, [&] { ops.ApplyDropoutMask(x, bits, 0.05f, 0.0f, y); }},
      {"ApplyDropoutMask f32 +=", narrow,
       [&] { ops.ApplyDropoutMask(x_grad32, bits, 0.05f, 1.0f, dx32); }},
      {"GemmDropped u = xd A^T", narrow,
       [&] {
         ops.GemmDropped(false, false, true, tokens, r, hidden, x, hidden, lora_a, hidden, 0.0f, u,
                         r, bits, 0.05f, y);
       }},
      {"ApplyDropoutMask, Gemm u = xd A^T", narrow,
       [&] {
         ops.ApplyDropoutMask(x, bits, 0.05f, 0.0f, y);
         ops.Gemm(false, true, tokens, r, hidden, y, hidden, lora_a, hidden, 0.0f, u, r);
       }},
      {"GemmDropped dA += du^T xd", narrow,
       [&] {
         ops.GemmDropped(true, true, false, r, hidden, tokens, du, r, x, hidden, 1.0f, da, hidden,
                         bits, 0.05f, y);
       }},
      {"ApplyDropoutMask, Gemm dA += du^T xd", narrow,
       [&] {
         ops.ApplyDropoutMask(x, bits, 0.05f, 0.0f, y);
         ops.Gemm(true, false, r, hidden, tokens, du, r, y, hidden, 1.0f, da, hidden);
       }},
      {"GemmAddDropped dx += drop(du A)", narrow,
       [&] {
         ops.GemmAddDropped(false, false, tokens, hidden, r, du, r, lora_a, hidden, dx32, bits,
                            0.05f, x_grad32);
       }},
      {"Gemm, ApplyDropoutMask dx += drop(du A)", narrow,
       [&] {
         ops.Gemm(false, false, tokens, hidden, r, du, r, lora_a, hidden, 0.0f, x_grad32, hidden);
         ops.ApplyDropoutMask(x_grad32, bits, 0.05f, 1.0f, dx32);
       }},
      {"DroppedLinearBackward dA, dx", narrow,
       [&] {
         ops.DroppedLinearBackward(tokens, r, hidden, x, bits, 0.05f, lora_a, du, 1.0f, da, dx32, y,
                                   x_grad32);
       }},
      {"GemmDropped, GemmAddDropped dA, dx", narrow,
       [&] {
         ops.GemmDropped(true, true, false, r, hidden, tokens, du, r, x, hidden, 1.0f, da, hidden,
                         bits, 0.05f, y);
         ops.GemmAddDropped(false, false, tokens, hidden, r, du, r, lora_a, hidden, dx32, bits,
                            0.05f, x_grad32);
       }},
      {"GemmConcatK y = x W^T + u B^T", wide,
       [&] {
         ops.GemmConcatK(true, tokens, mlp, hidden, x, hidden, w_gate, hidden, r, u_kept, r, lora_b,
                         r, out, row_scratch);
       }},
      {"Gemm, Gemm y = x W^T; y += u B^T", wide,
       [&] {
         ops.Gemm(false, true, tokens, mlp, hidden, x, hidden, w_gate, hidden, 0.0f, out, mlp);
         ops.Gemm(false, true, tokens, mlp, r, u_kept, r, lora_b, r, 1.0f, out, mlp);
       }},
  };
  std::vector<std::function<void()>> runs;
  for (const Op& op : measured) runs.push_back(op.run);
  // One "flop" per element: the rates are elements per second; each op's own count below.
  const std::vector<double> rates = BestGflopsInterleaved(clock, 1.0, runs);
  for (size_t i = 0; i < measured.size(); ++i) {
    const double per_second = rates[i] * 1e9 * static_cast<double>(measured[i].elements);
    std::printf(
        "{\"op\":\"%s\",\"dtype\":\"%s\",\"elements\":%lld,\"us\":%.1f,\"gelem_s\":%.2f,"
        "\"kernels\":\"%s\"}\n",
        measured[i].name.c_str(), type, static_cast<long long>(measured[i].elements),
        1e6 * static_cast<double>(measured[i].elements) / per_second, per_second / 1e9,
        CpuKernelsName(SelectedCpuKernels()));
  }
  return 0;
}

}  // namespace air::bench
