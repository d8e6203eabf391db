// The per-op harness (ggml's test-backend-ops): every op of every registered backend
// (backend/registry.h: the CPU reference itself, the fast CPU kernels at the level this process
// selects — ctest runs this binary again under AIR_CPU_KERNELS=avx2 and =generic) is run on
// the same random inputs as ReferenceOps over a set of shapes, including ragged sizes that hit
// the edge paths of the blocked kernels. Inputs and outputs live in the backend's own memory
// (allocated, uploaded and read back through it, as a GPU backend needs), and each backend is
// held to its own declared tolerances; the measured worst error of each op family is printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "engine/backend/registry.h"
#include "engine/data/batch.h"
#include "engine/ops/cpu/fast_ops.h"
#include "engine/ops/cpu/reference_ops.h"
#include "test_util.h"

namespace air::engine {
namespace {

using testing::RandomVector;

// max |a - b| / (1 + max |b|): relative to the scale of the result.
float ScaledMaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float diff = 0.0f, scale = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return diff / (1.0f + scale);
}

// Arrays of one op call in a backend's memory: uploaded from host vectors, read back by
// address.
class DeviceArrays {
 public:
  explicit DeviceArrays(const Backend& backend) : backend_(backend) {}
  float* F32(const std::vector<float>& host) {
    return static_cast<float*>(Upload(DType::kF32, host.size(), host.data()));
  }
  int32_t* I32(const std::vector<int32_t>& host) {
    return static_cast<int32_t*>(Upload(DType::kI32, host.size(), host.data()));
  }
  double* F64(double value) { return static_cast<double*>(Upload(DType::kF64, 1, &value)); }
  std::vector<float> Get(const float* device) const {
    const View& v = views_.at(device);
    std::vector<float> out(static_cast<size_t>(v.numel()));
    backend_.CopyToHost(out.data(), v);
    return out;
  }
  double Get(const double* device) const { return backend_.ReadScalar(views_.at(device)); }

 private:
  void* Upload(DType dtype, size_t n, const void* host) {
    View view;
    auto buffer = backend_.AllocateView(dtype, {static_cast<int64_t>(n)}, &view);
    AIR_ENGINE_CHECK(buffer.ok(), "allocation failed");
    backend_.CopyToDevice(view, host);
    buffers_.push_back(std::move(buffer).value());
    views_[view.raw()] = view;
    return view.raw();
  }
  const Backend& backend_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::map<const void*, View> views_;
};

class OpsHarness : public ::testing::TestWithParam<RegisteredBackend> {
 protected:
  void SetUp() override {
    backend_ = testing::MakeBackend(GetParam().options.kind, GetParam().options.num_threads);
  }
  void TearDown() override {
    for (const auto& [family, worst] : worst_) {
      std::printf("[harness] %-12s %-20s worst %.3g (tolerance %.3g)\n", GetParam().name.c_str(),
                  family.c_str(), worst.first, worst.second);
    }
  }
  // Checks `measured` against the backend's tolerance for `family` and keeps the worst.
  void Expect(const std::string& family, double measured, double tolerance,
              const std::string& what) {
    auto& w = worst_[family];
    w = {std::max(w.first, measured), tolerance};
    EXPECT_LE(measured, tolerance) << GetParam().name << " " << family << " " << what;
  }
  const BackendTolerances& tol() const { return GetParam().tolerances; }

  ReferenceOps ref_;
  std::shared_ptr<Backend> backend_;
  std::map<std::string, std::pair<double, double>> worst_;
};

std::string BackendName(const ::testing::TestParamInfo<RegisteredBackend>& info) {
  std::string name = info.param.name;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

TEST_P(OpsHarness, GemmAllTransposesAndRaggedShapes) {
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes =
      {
          {1, 1, 1},      {3, 5, 7},      {8, 32, 16},    {9, 33, 17},
          {130, 70, 300}, {257, 300, 40}, {64, 1000, 64}, {1, 513, 129},
          {200, 1, 77},   {33, 4200, 300}};  // the last: two column blocks of B and two K slices
  for (auto [m, n, k] : shapes) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (float beta : {0.0f, 1.0f}) {
          const int64_t lda = ta ? m : k, ldb = tb ? k : n;
          auto a = RandomVector(static_cast<size_t>(m * k), 1);
          auto b = RandomVector(static_cast<size_t>(k * n), 2);
          auto c_ref = RandomVector(static_cast<size_t>(m * n), 3);
          DeviceArrays d(*backend_);
          float* c = d.F32(c_ref);
          backend_->Gemm(ta, tb, m, n, k, d.F32(a), lda, d.F32(b), ldb, beta, c, n);
          ref_.Gemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, beta, c_ref.data(), n);
          Expect("gemm/sqrt(k)", ScaledMaxDiff(d.Get(c), c_ref) / std::sqrt(double(k)),
                 tol().gemm_per_sqrt_k,
                 "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                     " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
        }
      }
    }
  }
}

TEST_P(OpsHarness, GemmBetaZeroIgnoresNaNInOutputAndStridedOperands) {
  const int64_t m = 20, n = 40, k = 24, ld_pad = 7;
  auto a = RandomVector(static_cast<size_t>(m * (k + ld_pad)), 4);
  auto b = RandomVector(static_cast<size_t>(n * (k + ld_pad)), 5);
  std::vector<float> c_ref(static_cast<size_t>(m * (n + ld_pad)), NAN);
  DeviceArrays d(*backend_);
  float* c = d.F32(c_ref);
  ref_.Gemm(false, true, m, n, k, a.data(), k + ld_pad, b.data(), k + ld_pad, 0.0f, c_ref.data(),
            n + ld_pad);
  backend_->Gemm(false, true, m, n, k, d.F32(a), k + ld_pad, d.F32(b), k + ld_pad, 0.0f, c,
                 n + ld_pad);
  const auto c_got = d.Get(c);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n + ld_pad; ++j) {
      const float r = c_ref[i * (n + ld_pad) + j], f = c_got[i * (n + ld_pad) + j];
      if (j < n) {
        ASSERT_FALSE(std::isnan(f));
        EXPECT_NEAR(f, r, 1e-4f);
      } else {
        EXPECT_TRUE(std::isnan(f)) << "wrote outside the matrix at column " << j;
      }
    }
  }
}

TEST_P(OpsHarness, GemmWithZeroDepthScalesC) {
  DeviceArrays d(*backend_);
  float* c = d.F32({1, 2, 3, 4});
  backend_->Gemm(false, false, 2, 2, 0, nullptr, 0, nullptr, 2, 1.0f, c, 2);
  EXPECT_EQ(d.Get(c), (std::vector<float>{1, 2, 3, 4}));
  backend_->Gemm(false, false, 2, 2, 0, nullptr, 0, nullptr, 2, 0.0f, c, 2);
  EXPECT_EQ(d.Get(c), (std::vector<float>{0, 0, 0, 0}));
}

TEST_P(OpsHarness, RmsNormForwardBackward) {
  for (auto [rows, dim] : std::vector<std::pair<int64_t, int64_t>>{{1, 8}, {37, 64}, {300, 130}}) {
    auto x = RandomVector(static_cast<size_t>(rows * dim), 6);
    auto w = RandomVector(static_cast<size_t>(dim), 7);
    auto dy = RandomVector(static_cast<size_t>(rows * dim), 8);
    std::vector<float> y_ref(x.size()), r_ref(rows);
    DeviceArrays d(*backend_);
    float *dx_ = d.F32(x), *dw_ = d.F32(w), *y = d.F32(y_ref), *r = d.F32(r_ref);
    ref_.RmsNormForward(x.data(), w.data(), rows, dim, 1e-5f, y_ref.data(), r_ref.data());
    backend_->RmsNormForward(dx_, dw_, rows, dim, 1e-5f, y, r);
    const std::string what = std::to_string(rows) + "x" + std::to_string(dim);
    Expect("rmsnorm", ScaledMaxDiff(d.Get(y), y_ref), tol().rowwise, what);
    Expect("rmsnorm", ScaledMaxDiff(d.Get(r), r_ref), tol().rowwise, what);
    std::vector<float> dx_ref(x.size(), 0.5f), dw_ref(dim, 0.25f);
    float* gx = d.F32(dx_ref);
    float* gw = d.F32(dw_ref);
    float* r_in = d.F32(r_ref);
    ref_.RmsNormBackward(x.data(), w.data(), r_ref.data(), dy.data(), rows, dim, dx_ref.data(),
                         dw_ref.data());
    backend_->RmsNormBackward(dx_, dw_, r_in, d.F32(dy), rows, dim, gx, gw);
    Expect("rmsnorm_bwd", ScaledMaxDiff(d.Get(gx), dx_ref), tol().rowwise_backward, what);
    Expect("rmsnorm_bwd", ScaledMaxDiff(d.Get(gw), dw_ref), tol().rowwise_backward, what);
  }
}

TEST_P(OpsHarness, SwigluForwardBackward) {
  const int64_t n = 40000;  // large enough to be split over threads
  auto g = RandomVector(n, 9, 3.0f), u = RandomVector(n, 10), dout = RandomVector(n, 11);
  std::vector<float> o_ref(n), dg_ref(n, 1.0f), du_ref(n);
  DeviceArrays d(*backend_);
  float *gd = d.F32(g), *ud = d.F32(u), *o = d.F32(o_ref), *dg = d.F32(dg_ref), *du = d.F32(du_ref);
  ref_.SwigluForward(g.data(), u.data(), n, o_ref.data());
  backend_->SwigluForward(gd, ud, n, o);
  Expect("swiglu", ScaledMaxDiff(d.Get(o), o_ref), tol().rowwise, "forward");
  ref_.SwigluBackward(g.data(), u.data(), dout.data(), n, dg_ref.data(), du_ref.data());
  backend_->SwigluBackward(gd, ud, d.F32(dout), n, dg, du);
  Expect("swiglu", ScaledMaxDiff(d.Get(dg), dg_ref), tol().rowwise, "dgate");
  Expect("swiglu", ScaledMaxDiff(d.Get(du), du_ref), tol().rowwise, "dup");
}

TEST_P(OpsHarness, AdamWUpdateMatchesTheReference) {
  // Sizes: below one thread's chunk, ragged over several chunks and vectors.
  for (int64_t n : {1, 17, 100003}) {
    for (bool decay : {false, true}) {
      AdamWScalars s;
      s.step_size = 1e-3f / 0.19f;
      s.bias_correction2_sqrt = 0.0446f;
      s.decay = decay;
      s.decay_factor = 1.0f - 1e-3f * 0.1f;
      const auto g = RandomVector(static_cast<size_t>(n), 11);
      auto p_ref = RandomVector(static_cast<size_t>(n), 12);
      auto m_ref = RandomVector(static_cast<size_t>(n), 13, 0.1f);
      auto v_ref = RandomVector(static_cast<size_t>(n), 14, 0.1f);
      for (auto& x : v_ref) x = x * x;
      DeviceArrays d(*backend_);
      float *p = d.F32(p_ref), *gd = d.F32(g), *m = d.F32(m_ref), *v = d.F32(v_ref);
      for (int step = 0; step < 3; ++step) {
        ref_.AdamWUpdate(s, n, p_ref.data(), g.data(), m_ref.data(), v_ref.data());
        backend_->AdamWUpdate(s, n, p, gd, m, v);
      }
      const std::string what = std::to_string(n) + (decay ? " decay" : "");
      if (tol().elementwise_exact) {
        EXPECT_EQ(d.Get(p), p_ref) << what;
        EXPECT_EQ(d.Get(m), m_ref) << what;
        EXPECT_EQ(d.Get(v), v_ref) << what;
      }
      Expect("adamw", ScaledMaxDiff(d.Get(p), p_ref), tol().rowwise, what);
    }
  }
}

TEST_P(OpsHarness, SumOfSquaresAccumulatesAndScale) {
  for (int64_t n : {1, 31, 250001}) {
    auto x = RandomVector(static_cast<size_t>(n), 21, 3.0f);
    double want = 0.5;  // the op accumulates into what the scalar holds
    ref_.SumOfSquares(x.data(), n, &want);
    DeviceArrays d(*backend_);
    float* xd = d.F32(x);
    double* sum = d.F64(0.5);
    double* again = d.F64(0.5);
    backend_->SumOfSquares(xd, n, sum);
    backend_->SumOfSquares(xd, n, again);
    Expect("reduction", std::fabs(d.Get(sum) - want) / want, tol().reduction_relative,
           std::to_string(n));
    EXPECT_EQ(d.Get(sum), d.Get(again)) << "not deterministic, n=" << n;
    ref_.Scale(x.data(), n, 0.37f);
    backend_->Scale(xd, n, 0.37f);
    if (tol().elementwise_exact) {
      EXPECT_EQ(d.Get(xd), x) << n;
    }
  }
}

TEST_P(OpsHarness, CrossEntropyForwardBackwardWithIgnoredRows) {
  const int64_t n = 50, vocab = 1001;
  auto logits = RandomVector(static_cast<size_t>(n * vocab), 12, 4.0f);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = i % 7 == 0 ? kIgnoreIndex : (i * 37) % vocab;
  std::vector<float> lse_ref(n);
  double loss_ref = 0.0;
  ref_.CrossEntropyForward(logits.data(), targets.data(), n, vocab, lse_ref.data(), &loss_ref);
  DeviceArrays d(*backend_);
  float *ld = d.F32(logits), *lse = d.F32(lse_ref);
  int32_t* td = d.I32(targets);
  double* loss = d.F64(123.0);  // written, not accumulated
  backend_->CrossEntropyForward(ld, td, n, vocab, lse, loss);
  Expect("reduction", std::fabs(d.Get(loss) - loss_ref) / std::fabs(loss_ref),
         tol().reduction_relative, "loss sum");
  Expect("rowwise", ScaledMaxDiff(d.Get(lse), lse_ref), tol().rowwise, "lse");
  std::vector<float> d_ref(logits.size());
  ref_.CrossEntropyBackward(logits.data(), targets.data(), lse_ref.data(), n, vocab, 0.1f,
                            d_ref.data());
  float* lse_in = d.F32(lse_ref);
  backend_->CrossEntropyBackward(ld, td, lse_in, n, vocab, 0.1f, ld);  // in place
  const auto d_got = d.Get(ld);
  Expect("ce_grad", ScaledMaxDiff(d_got, d_ref), tol().cross_entropy_grad, "dlogits");
  for (int64_t c = 0; c < vocab; ++c) ASSERT_EQ(d_got[c], 0.0f) << "ignored row 0 has grads";
}

TEST_P(OpsHarness, MemoryCallsCopyFillAndZero) {
  View v;
  auto buffer = backend_->AllocateView(DType::kF32, {2, 3}, &v);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(v.device(), backend_->device());
  const std::vector<float> in = {1, 2, 3, 4, 5, 6};
  backend_->CopyToDevice(v, in.data());
  backend_->Copy(v.Rows(0, 1), v.Rows(1, 1));
  std::vector<float> out(6);
  backend_->CopyToHost(out.data(), v);
  EXPECT_EQ(out, (std::vector<float>{4, 5, 6, 4, 5, 6}));
  backend_->Fill(v.Rows(1, 1), 2.5f);
  backend_->Zero(v.Rows(0, 1));
  backend_->Synchronize();
  backend_->CopyToHost(out.data(), v);
  EXPECT_EQ(out, (std::vector<float>{0, 0, 0, 2.5f, 2.5f, 2.5f}));
}

INSTANTIATE_TEST_SUITE_P(Backends, OpsHarness, ::testing::ValuesIn(RegisteredBackends(3)),
                         BackendName);

struct AttentionCase {
  int64_t batch, q_len, kv_len, q_heads, kv_heads, head_dim, q_offset, window;
  bool segments;
};

class AttentionHarness
    : public ::testing::TestWithParam<std::tuple<RegisteredBackend, AttentionCase>> {};

TEST_P(AttentionHarness, ForwardAndBackwardMatchReference) {
  const auto& [registered, p] = GetParam();
  const auto backend =
      testing::MakeBackend(registered.options.kind, registered.options.num_threads);
  const BackendTolerances& tol = registered.tolerances;
  ReferenceOps ref;
  AttentionShape s;
  s.batch = p.batch;
  s.q_len = p.q_len;
  s.kv_len = p.kv_len;
  s.q_heads = p.q_heads;
  s.kv_heads = p.kv_heads;
  s.head_dim = p.head_dim;
  s.q_offset = p.q_offset;
  s.sliding_window = p.window;
  s.scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  const size_t q_size = static_cast<size_t>(p.batch * p.q_len * p.q_heads * p.head_dim);
  const size_t kv_size = static_cast<size_t>(p.batch * p.kv_len * p.kv_heads * p.head_dim);
  auto q = RandomVector(q_size, 13), k = RandomVector(kv_size, 14), v = RandomVector(kv_size, 15);
  auto dout = RandomVector(q_size, 16);
  std::vector<int32_t> q_seg, kv_seg;
  if (p.segments) {
    // Two documents per row; the second starts a third of the way in.
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t j = 0; j < p.kv_len; ++j) kv_seg.push_back(j < p.kv_len / 3 ? 1 : 2);
      for (int64_t i = 0; i < p.q_len; ++i) {
        q_seg.push_back(p.q_offset + i < p.kv_len / 3 ? 1 : 2);
      }
    }
  }
  const int32_t* qs = p.segments ? q_seg.data() : nullptr;
  const int32_t* ks = p.segments ? kv_seg.data() : nullptr;
  const size_t lse_size = static_cast<size_t>(p.batch * p.q_heads * p.q_len);
  std::vector<float> o_ref(q_size), l_ref(lse_size);
  DeviceArrays d(*backend);
  float *qd = d.F32(q), *kd = d.F32(k), *vd = d.F32(v), *o = d.F32(o_ref), *l = d.F32(l_ref);
  const int32_t* qsd = p.segments ? d.I32(q_seg) : nullptr;
  const int32_t* ksd = p.segments ? d.I32(kv_seg) : nullptr;
  ref.AttentionForward(s, q.data(), k.data(), v.data(), qs, ks, o_ref.data(), l_ref.data());
  backend->AttentionForward(s, qd, kd, vd, qsd, ksd, o, l);
  const float fwd = std::max(ScaledMaxDiff(d.Get(o), o_ref), ScaledMaxDiff(d.Get(l), l_ref));
  EXPECT_LE(fwd, tol.attention) << registered.name;
  std::vector<float> dq_ref(q_size, 0.1f), dk_ref(kv_size), dv_ref(kv_size);
  float *dq = d.F32(dq_ref), *dk = d.F32(dk_ref), *dv = d.F32(dv_ref);
  float *o_in = d.F32(o_ref), *l_in = d.F32(l_ref);
  ref.AttentionBackward(s, q.data(), k.data(), v.data(), qs, ks, o_ref.data(), l_ref.data(),
                        dout.data(), dq_ref.data(), dk_ref.data(), dv_ref.data());
  backend->AttentionBackward(s, qd, kd, vd, qsd, ksd, o_in, l_in, d.F32(dout), dq, dk, dv);
  const float bwd = std::max({ScaledMaxDiff(d.Get(dq), dq_ref), ScaledMaxDiff(d.Get(dk), dk_ref),
                              ScaledMaxDiff(d.Get(dv), dv_ref)});
  EXPECT_LE(bwd, tol.attention_backward) << registered.name;
  std::printf(
      "[harness] %-12s attention B%lld Tq%lld Tk%lld  forward %.3g (tolerance %.3g)  "
      "backward %.3g (tolerance %.3g)\n",
      registered.name.c_str(), static_cast<long long>(p.batch), static_cast<long long>(p.q_len),
      static_cast<long long>(p.kv_len), fwd, tol.attention, bwd, tol.attention_backward);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionHarness,
    ::testing::Combine(
        ::testing::ValuesIn(RegisteredBackends(3)),
        ::testing::Values(AttentionCase{1, 1, 1, 1, 1, 2, 0, 0, false},
                          AttentionCase{2, 17, 17, 4, 2, 16, 0, 0, false},    // GQA
                          AttentionCase{1, 150, 150, 2, 1, 32, 0, 0, false},  // several q blocks
                          AttentionCase{2, 70, 70, 4, 4, 8, 0, 5, false},     // sliding window
                          AttentionCase{2, 40, 40, 6, 2, 16, 0, 0, true},     // packed segments
                          AttentionCase{2, 3, 20, 4, 2, 16, 17, 0, false},    // KV-cache step
                          AttentionCase{1, 1, 90, 2, 1, 8, 89, 7, false})));  // decode + window

TEST(ThreadPool, CoversTheRangeExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 3, 4, 5, 1000}) {
    std::vector<int> hits(static_cast<size_t>(n), 0);
    pool.ParallelFor(n, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (int h : hits) ASSERT_EQ(h, 1);
  }
}

TEST(BackendRegistry, KnowsItsKinds) {
  EXPECT_EQ((*CreateBackend({"reference", 0}))->name(), "reference");
  EXPECT_EQ((*CreateBackend({"fast", 2}))->name(), "fast");
  const Status unknown = CreateBackend({"cuda", 0}).status();
  EXPECT_EQ(unknown.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("valid backends are fast, reference"), std::string::npos);
  EXPECT_FALSE(IsKnownBackendKind("cuda"));
  const auto registered = RegisteredBackends(2);
  ASSERT_EQ(registered.size(), 2u);
  EXPECT_EQ(registered[0].name, "reference");
  EXPECT_EQ(registered[1].name.rfind("fast/", 0), 0u);
}

}  // namespace
}  // namespace air::engine
