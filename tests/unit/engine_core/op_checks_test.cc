// The ops' argument checks run in front of every backend's kernels (ops.h, ops_checked.cc): for
// every op, one bad call (a wrong dtype for an argument's role, a view too small, sizes that do
// not match) on every registered backend aborts with the same message, naming the op, the
// argument and what is wrong. A new op must add its bad call here; a new backend is covered by
// registering it.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <string>

#include "engine/backend/registry.h"
#include "op_test_util.h"

namespace air::engine {
namespace {

using testing::DeviceArrays;

// The views a bad call is built from, in the backend's own memory: float data (4, 4) in F32 and
// BF16, I32 indices (4, 4), a one-element F64 scalar, and an F32 (2, 4) half as large.
struct Args {
  explicit Args(const Backend& backend) : arrays(backend) {}
  DeviceArrays arrays;
  View f32 = arrays.F32(std::vector<float>(16, 0.5f), {4, 4});
  View bf16 = arrays.Data(std::vector<float>(16, 0.5f), DType::kBF16, {4, 4});
  View i32 = arrays.I32(std::vector<int32_t>(16, 0), {4, 4});
  View f64 = arrays.F64(0.0);
  View half = arrays.F32(std::vector<float>(8, 0.5f), {2, 4});
  View row = arrays.F32(std::vector<float>(4, 1.0f), {4});
};

struct BadCall {
  std::string message;  // what the abort prints (a regular expression without metacharacters)
  std::function<void(const Ops&, Args&)> call;
};

// One query row of two tokens, one head of dimension 2 (q, k, v: 4 elements each).
AttentionShape TinyAttention() {
  AttentionShape s;
  s.batch = 1;
  s.q_len = s.kv_len = 2;
  s.q_heads = s.kv_heads = 1;
  s.head_dim = 2;
  s.scale = 0.5f;
  return s;
}

const std::map<OpKind, BadCall>& BadCalls() {
  static const std::map<OpKind, BadCall> kCalls = {
      {OpKind::kGemm,
       {"Gemm: argument c: I32 is not a float dtype",
        [](const Ops& o, Args& a) {
          o.Gemm(false, false, 4, 4, 4, a.f32, 4, a.f32, 4, 0, a.i32, 4);
        }}},
      {OpKind::kEmbeddingForward,
       {"EmbeddingForward: argument ids: must be I32, is F32",
        [](const Ops& o, Args& a) { o.EmbeddingForward(a.f32, a.f32, a.f32); }}},
      {OpKind::kEmbeddingBackward,
       {"EmbeddingBackward: argument dout: holds 16 elements, 64 are addressed",
        [](const Ops& o, Args& a) { o.EmbeddingBackward(a.i32, a.f32, -1, a.f32); }}},
      {OpKind::kRmsNormForward,
       {"RmsNormForward: argument x: I32 is not a float dtype",
        [](const Ops& o, Args& a) { o.RmsNormForward(a.i32, a.row, 1e-5f, a.f32, a.row); }}},
      {OpKind::kRmsNormBackward,
       {"RmsNormBackward: argument dw: I32 is not a float dtype",
        [](const Ops& o, Args& a) {
          o.RmsNormBackward(a.f32, a.row, a.row, a.f32, a.f32, a.i32);
        }}},
      {OpKind::kRopeTables,
       {"RopeTables: argument positions: must be I32, is F32",
        [](const Ops& o, Args& a) { o.RopeTables(a.f32, a.row, 1.0f, a.f32, a.f32); }}},
      {OpKind::kRopeForward,
       {"RopeForward: argument cos, sin: 16 vs 8 elements",
        [](const Ops& o, Args& a) { o.RopeForward(a.f32, a.f32, a.half); }}},
      {OpKind::kRopeBackward,
       {"RopeBackward: argument dx: I32 is not a float dtype",
        [](const Ops& o, Args& a) { o.RopeBackward(a.i32, a.half, a.half); }}},
      {OpKind::kAttentionForward,
       {"AttentionForward: argument sinks: holds 4 elements, 8 are addressed",
        [](const Ops& o, Args& a) {
          AttentionShape s = TinyAttention();
          s.q_heads = s.kv_heads = 8;
          s.head_dim = 1;
          o.AttentionForward(s, a.f32, a.f32, a.f32, a.row, View(), View(), a.f32, View());
        }}},
      {OpKind::kAttentionBackward,
       {"AttentionBackward: argument lse: holds 0 elements, 2 are addressed",
        [](const Ops& o, Args& a) {
          o.AttentionBackward(TinyAttention(), a.row, a.row, a.row, View(), View(), View(), a.row,
                              View(), a.row, a.row, a.row, a.row, View());
        }}},
      {OpKind::kSwigluForward,
       {"SwigluForward: argument gate, out: 16 vs 8 elements",
        [](const Ops& o, Args& a) { o.SwigluForward(a.f32, a.f32, a.half); }}},
      {OpKind::kSwigluBackward,
       {"SwigluBackward: argument dgate: I32 is not a float dtype",
        [](const Ops& o, Args& a) { o.SwigluBackward(a.f32, a.f32, a.f32, a.i32, a.f32); }}},
      {OpKind::kClampedSwigluForward,
       {"ClampedSwigluForward: argument gate_up: holds 8 elements, 32 are addressed",
        [](const Ops& o, Args& a) { o.ClampedSwigluForward(a.half, 1.7f, 7.0f, a.f32); }}},
      {OpKind::kClampedSwigluBackward,
       {"ClampedSwigluBackward: argument dgate_up: I32 is not a float dtype",
        [](const Ops& o, Args& a) { o.ClampedSwigluBackward(a.f32, 1.7f, 7.0f, a.half, a.i32); }}},
      {OpKind::kRouterTopK,
       {"RouterTopK: argument indices: must be I32, is F32",
        [](const Ops& o, Args& a) { o.RouterTopK(a.f32, a.f32, a.f32); }}},
      {OpKind::kRouterTopKBackward,
       {"RouterTopKBackward: argument weights: must be F32, is I32",
        [](const Ops& o, Args& a) { o.RouterTopKBackward(a.i32, a.i32, a.f32, a.f32); }}},
      {OpKind::kMoeDispatch,
       {"MoeDispatch: argument offsets: must be I32, is F32",
        [](const Ops& o, Args& a) { o.MoeDispatch(a.i32, a.f32, a.i32, a.i32); }}},
      {OpKind::kMoeGather,
       {"MoeGather: argument token_of_row: must be I32, is F32",
        [](const Ops& o, Args& a) { o.MoeGather(a.f32, a.f32, a.f32); }}},
      {OpKind::kMoeGatherBackward,
       {"MoeGatherBackward: argument dx: I32 is not a float dtype",
        [](const Ops& o, Args& a) { o.MoeGatherBackward(a.f32, a.i32, a.i32); }}},
      {OpKind::kMoeCombine,
       {"MoeCombine: argument weights: must be F32, is BF16",
        [](const Ops& o, Args& a) { o.MoeCombine(a.f32, a.bf16, a.i32, a.f32); }}},
      {OpKind::kMoeCombineBackward,
       {"MoeCombineBackward: argument dweights: must be F32, is I32",
        [](const Ops& o, Args& a) {
          o.MoeCombineBackward(a.f32, a.f32, a.i32, a.f32, a.f32, a.i32);
        }}},
      {OpKind::kGroupedGemm,
       {"GroupedGemm: argument offsets: must be I32, is F32",
        [](const Ops& o, Args& a) {
          o.GroupedGemm(false, 4, 4, a.f32, a.f32, View(), a.f32, 0.0f, a.f32);
        }}},
      {OpKind::kGroupedGemmWeightGrad,
       {"GroupedGemmWeightGrad: argument dw: holds 8 elements, 240 are addressed",
        [](const Ops& o, Args& a) {
          o.GroupedGemmWeightGrad(4, 4, a.f32, a.f32, a.i32, a.half, View());
        }}},
      {OpKind::kDequantizeMxfp4,
       {"DequantizeMxfp4: argument blocks: must be U8, is F32",
        [](const Ops& o, Args& a) { o.DequantizeMxfp4(1, 1, 1, a.f32, a.f32, a.f32); }}},
      {OpKind::kAddInPlace,
       {"AddInPlace: argument y, x: 16 vs 8 elements",
        [](const Ops& o, Args& a) { o.AddInPlace(a.f32, a.half); }}},
      {OpKind::kAddBias,
       {"AddBias: argument bias: I32 is not a float dtype",
        [](const Ops& o, Args& a) { o.AddBias(a.f32, a.i32); }}},
      {OpKind::kBiasBackward,
       {"BiasBackward: argument dbias: I32 is not a float dtype",
        [](const Ops& o, Args& a) { o.BiasBackward(a.f32, a.i32); }}},
      {OpKind::kConvert,
       {"Convert: argument dst: I32 is not a float dtype",
        [](const Ops& o, Args& a) { o.Convert(a.f32, a.i32); }}},
      {OpKind::kDropout,
       {"Dropout: argument x, out: 16 vs 8 elements",
        [](const Ops& o, Args& a) { o.Dropout(a.f32, 0.1f, 7, a.half); }}},
      {OpKind::kDropoutMask,
       {"DropoutMask: argument bits: must be U8, is F32",
        [](const Ops& o, Args& a) { o.DropoutMask(8, 0.1f, 7, a.f32); }}},
      {OpKind::kApplyDropoutMask,
       {"ApplyDropoutMask: argument bits: must be U8, is I32",
        [](const Ops& o, Args& a) { o.ApplyDropoutMask(a.f32, a.i32, 0.1f, 0.0f, a.f32); }}},
      {OpKind::kGemmDropped,
       {"GemmDropped: argument bits: must be U8, is I32",
        [](const Ops& o, Args& a) {
          o.GemmDropped(false, false, false, 4, 4, 4, a.f32, 4, a.f32, 4, 0, a.f32, 4, a.i32, 0.1f,
                        a.f32);
        }}},
      {OpKind::kGemmAddDropped,
       {"GemmAddDropped: argument scratch: must be F32, is BF16",
        [](const Ops& o, Args& a) {
          const View bits = a.arrays.U8(std::vector<uint8_t>(2, 0xFF));
          o.GemmAddDropped(false, false, 4, 4, 4, a.f32, 4, a.f32, 4, a.f32, bits, 0.1f, a.bf16);
        }}},
      {OpKind::kGemmConcatK,
       {"GemmConcatK: argument scratch: must be F32, is BF16",
        [](const Ops& o, Args& a) {
          o.GemmConcatK(true, 4, 4, 2, a.bf16, 2, a.bf16, 2, 2, a.bf16, 2, a.bf16, 2, a.bf16,
                        a.bf16);
        }}},
      {OpKind::kDroppedLinearBackward,
       {"DroppedLinearBackward: argument f32_scratch: must be F32, is BF16",
        [](const Ops& o, Args& a) {
          const View bits = a.arrays.U8(std::vector<uint8_t>(2, 0xFF));
          o.DroppedLinearBackward(4, 4, 4, a.f32, bits, 0.1f, a.f32, a.f32, 1.0f, a.f32, a.f32,
                                  a.f32, a.bf16);
        }}},
      {OpKind::kPackGemmB,
       {"PackGemmB: argument b: I32 is not a float dtype",
        [](const Ops& o, Args& a) {
          const View packed = a.arrays.U8(std::vector<uint8_t>(64, 0));
          o.PackGemmB(false, 4, 4, a.i32, 4, packed);
        }}},
      {OpKind::kGemmPackedB,
       {"GemmPackedB: argument packed: must be U8, is F32",
        [](const Ops& o, Args& a) { o.GemmPackedB(4, 4, 4, a.f32, 4, a.f32, 0.0f, a.f32, 4); }}},
      {OpKind::kCrossEntropyForward,
       {"CrossEntropyForward: argument loss_sum: must be one F64, is 16 x F32",
        [](const Ops& o, Args& a) { o.CrossEntropyForward(a.f32, a.i32, a.f32, a.f32); }}},
      {OpKind::kCrossEntropyBackward,
       {"CrossEntropyBackward: argument targets: must be I32, is F32",
        [](const Ops& o, Args& a) { o.CrossEntropyBackward(a.f32, a.f32, a.f32, 1.0f, a.f32); }}},
      {OpKind::kAdamWUpdate,
       {"AdamWUpdate: argument v: I32 is not a float dtype",
        [](const Ops& o, Args& a) { o.AdamWUpdate({}, a.f32, a.f32, a.f32, a.i32); }}},
      {OpKind::kSumOfSquares,
       {"SumOfSquares: argument sum: must be one F64, is 16 x F32",
        [](const Ops& o, Args& a) { o.SumOfSquares(a.f32, a.f32); }}},
      {OpKind::kScale,
       {"Scale: argument x: I32 is not a float dtype",
        [](const Ops& o, Args& a) { o.Scale(a.i32, 2.0f); }}},
  };
  return kCalls;
}

TEST(OpChecks, EveryOpHasABadCall) {
  for (OpKind op : kAllOps) EXPECT_TRUE(BadCalls().count(op)) << OpName(op) << " has no bad call";
  EXPECT_EQ(BadCalls().size(), std::size(kAllOps));
}

TEST(OpChecks, ABadCallGetsTheSameErrorOnEveryRegisteredBackend) {
  // Each death test re-executes the binary: a forked child cannot use CUDA once the parent has.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::vector<RegisteredBackend> backends = RegisteredBackends(2);
  ASSERT_GE(backends.size(), 2u);
  for (const RegisteredBackend& r : backends) {
    for (const auto& [op, bad] : BadCalls()) {
      // The backend is made in the child (no worker threads or CUDA state inherited).
      EXPECT_DEATH(
          {
            const std::shared_ptr<Backend> backend = std::move(CreateBackend(r.options)).value();
            Args args(*backend);
            bad.call(*backend, args);
          },
          "engine invariant failed: " + bad.message)
          << r.name << " " << OpName(op);
    }
  }
}

// GemmDropped's mask addresses its dropped operand's flat elements: a strided dropped operand,
// or a scratch of another dtype than the operand's, is refused on every backend, naming it.
TEST(OpChecks, GemmDroppedRefusesAStridedOperandAndAScratchOfAnotherDtype) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::vector<BadCall> calls = {
      {"the dropped operand must be contiguous",  // A (2, 3) with ld 4
       [](const Ops& o, Args& a) {
         const View bits = a.arrays.U8(std::vector<uint8_t>(2, 0xFF));
         o.GemmDropped(false, false, false, 2, 4, 3, a.f32, 4, a.f32, 4, 0, a.f32, 4, bits, 0.1f,
                       a.f32);
       }},
      {"scratch must have the dropped operand's dtype",  // B BF16, scratch F32
       [](const Ops& o, Args& a) {
         const View bits = a.arrays.U8(std::vector<uint8_t>(2, 0xFF));
         o.GemmDropped(true, false, false, 4, 4, 4, a.f32, 4, a.bf16, 4, 0, a.f32, 4, bits, 0.1f,
                       a.f32);
       }}};
  for (const RegisteredBackend& r : RegisteredBackends(2)) {
    for (const BadCall& bad : calls) {
      EXPECT_DEATH(
          {
            const std::shared_ptr<Backend> backend = std::move(CreateBackend(r.options)).value();
            Args args(*backend);
            bad.call(*backend, args);
          },
          bad.message)
          << r.name;
    }
  }
}

// The CPU backends read the grouped GEMM's offsets in place and refuse ones that fall or pass
// the rows (a GPU reads them only on the device and clamps each group into the rows).
TEST(OpChecks, CpuGroupedGemmRefusesOffsetsThatFallOrPassTheRows) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* kind : {"reference", "fast"}) {
    EXPECT_DEATH(
        {
          const std::shared_ptr<Backend> backend = std::move(CreateBackend({kind, 1})).value();
          Args a(*backend);
          const View offsets = a.arrays.I32({3, 2});  // 4 rows of 4; the group falls
          backend->GroupedGemm(false, 4, 4, a.f32, a.f32, View(), offsets, 0.0f, a.f32);
        },
        "grouped GEMM offsets must rise from >= 0 to <= 4 rows")
        << kind;
    EXPECT_DEATH(
        {
          const std::shared_ptr<Backend> backend = std::move(CreateBackend({kind, 1})).value();
          Args a(*backend);
          const View offsets = a.arrays.I32({0, 5});  // past the 4 rows
          backend->GroupedGemmWeightGrad(4, 4, a.f32, a.f32, offsets, a.f32, View());
        },
        "offsets\\[1\\] = 5")
        << kind;
  }
}

// Valid arguments pass the checks and reach the kernel (the checks reject only what is wrong).
TEST(OpChecks, AValidCallPassesTheChecks) {
  for (const RegisteredBackend& r : RegisteredBackends(2)) {
    const std::shared_ptr<Backend> backend = std::move(CreateBackend(r.options)).value();
    Args a(*backend);
    const View dx = a.arrays.F32(std::vector<float>(16, 0.0f), {4, 4});
    const View dw = a.arrays.F32(std::vector<float>(4, 0.0f), {4});
    backend->RmsNormBackward(a.f32, a.row, a.row, a.f32, dx, dw);
    EXPECT_NE(a.arrays.Get(dw)[0], 0.0f) << r.name;  // the kernel ran
    backend->AddBias(a.f32, a.row);
    backend->Scale(a.f32, 2.0f);
    EXPECT_FLOAT_EQ(a.arrays.Get(a.f32)[0], 2 * (0.5f + 1.0f)) << r.name;
  }
}

}  // namespace
}  // namespace air::engine
