// The fused head's weight packed once per pass (lm_head.h's packed views, Ops::PackGemmB and
// GemmPackedB): the chunks' products read the packed copies and give the bits of the products
// that pack the weight themselves (loss, lse, dxf and the head's gradient), a trained and a
// frozen head; and the copies are taken only when the head has several chunks.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cpu/gemm_mixed.h"
#include "engine/backend/registry.h"
#include "engine/model/lm_head.h"
#include "engine/workspace.h"
#include "op_test_util.h"
#include "test_util.h"

namespace air::engine {
namespace {

using testing::DeviceArrays;
using testing::MakeBackend;
using testing::RandomVector;

struct HeadRun {
  double loss_sum = 0;
  std::vector<float> lse, dxf, grad;
  bool packed = false;
};

// One training pass of the fused head over n rows with or without the packed copies.
HeadRun RunHead(const Backend& ops, int64_t n, int64_t vocab, int64_t dim, bool trainable,
                bool pack) {
  DeviceArrays d(ops);
  Parameter head{.name = "output.weight", .shape = {vocab, dim}, .trainable = trainable};
  head.value =
      d.Data(RandomVector(static_cast<size_t>(vocab * dim), 1), DType::kBF16, {vocab, dim});
  if (trainable) head.grad = d.F32(RandomVector(static_cast<size_t>(vocab * dim), 2), {vocab, dim});
  const View xf = d.Data(RandomVector(static_cast<size_t>(n * dim), 3), DType::kBF16, {n, dim});
  std::vector<int32_t> targets(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) targets[i] = static_cast<int32_t>((i * 7919) % vocab);
  targets[5] = kIgnoreIndex;
  const View target_view = d.I32(targets);
  const View dxf = d.F32(std::vector<float>(static_cast<size_t>(n * dim)), {n, dim});
  const HeadPacking packing = pack ? PackingOfHead(ops, vocab, dim, DType::kBF16) : HeadPacking{};
  Workspace ws(&ops);
  HeadViews views;
  EXPECT_TRUE(ws.Arrange([&](Workspace& w) {
                  views = LayoutHead(w, n, vocab, false, DType::kBF16, true, trainable, packing);
                }).ok());
  ops.Zero(views.loss_sum);
  HeadForwardBackward(ops, xf, head, target_view, 0.01f, views, false, dxf);
  HeadRun run;
  run.loss_sum = ops.ReadScalar(views.loss_sum);
  run.lse = d.Get(views.lse);
  run.dxf = d.Get(dxf);
  if (trainable) run.grad = d.Get(head.grad);
  run.packed = !views.packed_for_logits.empty() && !views.packed_for_dx.empty();
  return run;
}

TEST(LmHeadPacking, PackedWeightGivesTheBitsOfTheProductsThatPackItThemselves) {
  // The path that packs B (avx512bf16), whether or not the rule picks it for this CPU.
  std::string why;
  if (!GemmBf16PathRuns(GemmBf16Path::kAvx512Bf16, &why)) {
    GTEST_SKIP() << "only the avx512bf16 GEMM path packs B, and this CPU cannot run it: " << why;
  }
  BackendOptions options{"fast", 2};
  options.cpu_gemm_path = "avx512bf16";
  const std::shared_ptr<Backend> backend = *CreateBackend(options);
  const int64_t vocab = 4096, dim = 64;
  const HeadPacking packing = PackingOfHead(*backend, vocab, dim, DType::kBF16);
  ASSERT_GT(packing.for_logits, 0);
  EXPECT_GT(packing.for_dx, 0);
  EXPECT_EQ(PackingOfHead(*backend, vocab, dim, DType::kF32).for_logits, 0);  // fp32: none
  // A frozen head: 256-row chunks (HeadChunkRows), so 600 rows take three; a trained one: its
  // 128 MiB chunk holds every row of 600 (one chunk: nothing to pack), and of 9000 (two chunks).
  for (auto [n, trainable] : {std::pair<int64_t, bool>{600, false}, {9000, true}, {600, true}}) {
    SCOPED_TRACE("n " + std::to_string(n) + (trainable ? " trained" : " frozen"));
    const HeadRun packed = RunHead(*backend, n, vocab, dim, trainable, true);
    const HeadRun plain = RunHead(*backend, n, vocab, dim, trainable, false);
    const bool chunks = n > HeadChunkRows(n, vocab, trainable);
    EXPECT_EQ(packed.packed, chunks);
    EXPECT_FALSE(plain.packed);
    EXPECT_EQ(packed.loss_sum, plain.loss_sum);
    EXPECT_EQ(packed.lse, plain.lse);
    EXPECT_EQ(packed.dxf, plain.dxf);
    EXPECT_EQ(packed.grad, plain.grad);
  }
}

}  // namespace
}  // namespace air::engine
