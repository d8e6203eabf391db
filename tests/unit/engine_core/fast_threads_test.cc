// The fast CPU ops that split their work differently on many threads give the same bits as on
// one: the attention backward's two-pass split (taken when there are fewer (batch row, KV head)
// pairs than half the threads) against its one-pass tasks, and the embedding backward's split
// of the columns against one thread, in every dtype pattern the trainer uses.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/backend/cpu/fast_ops.h"
#include "engine/ops/ops.h"
#include "op_test_util.h"

namespace air::engine {
namespace {

using testing::DeviceArrays;

std::vector<float> Wave(size_t n, float phase) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = std::sin(0.731f * static_cast<float>(i) + phase);
  return out;
}

struct Grads {
  std::vector<float> dq, dk, dv;
};

// Attention's backward on `threads` threads; q, k, v, out, dout in `in`, gradients in `grad`.
Grads AttentionBackwardOn(int threads, const AttentionShape& s, DType in, DType grad,
                          bool segments) {
  FastOps ops(threads);
  DeviceArrays d(ops);
  const size_t q_size = static_cast<size_t>(s.batch * s.q_len * s.q_heads * s.head_dim);
  const size_t kv_size = static_cast<size_t>(s.batch * s.kv_len * s.kv_heads * s.head_dim);
  const View q = d.Data(Wave(q_size, 0.1f), in), k = d.Data(Wave(kv_size, 0.2f), in);
  const View v = d.Data(Wave(kv_size, 0.3f), in);
  std::vector<int32_t> seg;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < s.q_len; ++i) seg.push_back(i < s.q_len / 3 ? 1 : 2);
  }
  const View q_seg = segments ? d.I32(seg) : View(), kv_seg = segments ? d.I32(seg) : View();
  const View out = d.Data(std::vector<float>(q_size), in);
  const View lse = d.F32(std::vector<float>(static_cast<size_t>(s.batch * s.q_heads * s.q_len)));
  ops.AttentionForward(s, q, k, v, View(), q_seg, kv_seg, out, lse);
  const View dout = d.Data(Wave(q_size, 0.4f), grad);
  const View dq = d.Data(std::vector<float>(q_size, 0.1f), grad);
  const View dk = d.Data(std::vector<float>(kv_size), grad);
  const View dv = d.Data(std::vector<float>(kv_size), grad);
  ops.AttentionBackward(s, q, k, v, View(), q_seg, kv_seg, out, lse, dout, dq, dk, dv, View());
  return {d.Get(dq), d.Get(dk), d.Get(dv)};
}

TEST(FastOpsThreads, AttentionBackwardSplitOnManyThreadsGivesTheOnePassBits) {
  AttentionShape s;
  s.batch = 1;
  s.q_len = s.kv_len = 200;  // several query and key blocks, the last ragged (4 of 64, 2 of 128)
  s.q_heads = 8;
  s.kv_heads = 2;  // 2 (row, KV head) pairs: 1 and 3 threads run one pass, 4 and 8 split
  s.head_dim = 64;
  s.scale = 0.125f;
  struct Pattern {
    std::string name;
    DType in, grad;
  };
  for (const Pattern& p :
       {Pattern{"f32", DType::kF32, DType::kF32}, Pattern{"bf16", DType::kBF16, DType::kBF16},
        Pattern{"bf16_f32grad", DType::kBF16, DType::kF32}}) {
    for (int window : {0, 70}) {
      for (bool segments : {false, true}) {
        s.sliding_window = window;
        const Grads one = AttentionBackwardOn(1, s, p.in, p.grad, segments);
        for (int threads : {3, 4, 8}) {
          const Grads many = AttentionBackwardOn(threads, s, p.in, p.grad, segments);
          const std::string what = p.name + " window " + std::to_string(window) +
                                   (segments ? " segments " : " ") + std::to_string(threads) +
                                   " threads";
          EXPECT_EQ(many.dq, one.dq) << what;
          EXPECT_EQ(many.dk, one.dk) << what;
          EXPECT_EQ(many.dv, one.dv) << what;
        }
      }
    }
  }
}

TEST(FastOpsThreads, EmbeddingBackwardSplitsColumnsWithTheOneThreadBits) {
  const int64_t vocab = 50, dim = 333, n = 700;  // ragged column pieces, repeated ids
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 13 + i / 7) % vocab);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    std::vector<float> first;
    for (int threads : {1, 2, 5}) {
      FastOps ops(threads);
      DeviceArrays d(ops);
      const View table = d.Data(Wave(static_cast<size_t>(vocab * dim), 0.5f), dtype, {vocab, dim});
      const View dout = d.Data(Wave(static_cast<size_t>(n * dim), 0.6f), dtype, {n, dim});
      ops.EmbeddingBackward(d.I32(ids), dout, /*skip_id=*/7, table);
      const std::vector<float> got = d.Get(table);
      if (threads == 1) {
        first = got;
      } else {
        EXPECT_EQ(got, first) << DTypeName(dtype) << " " << threads << " threads";
      }
    }
  }
}

}  // namespace
}  // namespace air::engine
