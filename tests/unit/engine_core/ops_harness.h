// The per-op harness's fixture (ops_harness_test.cc describes the harness): a backend from the
// registry and a precision per test, the fp32 reference beside it in its own memory, host data
// rounded to the tested dtype, and the worst error measured per op family, printed at the end of
// each test. Shared by ops_harness_test.cc and ops_harness_moe_test.cc (one suite, one
// instantiation).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/registry.h"
#include "op_test_util.h"
#include "test_util.h"

namespace air::engine::testing {

struct Precision {
  std::string name;
  DType in;                          // activations and weights
  DType out;                         // forward outputs
  DType grad;                        // gradients the backward ops accumulate into
  DType data() const { return in; }  // the dtype Supports() is asked about
};

inline const std::vector<Precision>& Precisions() {
  static const std::vector<Precision> kAll = {
      {"f32", DType::kF32, DType::kF32, DType::kF32},
      {"bf16", DType::kBF16, DType::kBF16, DType::kBF16},
      {"bf16_f32grad", DType::kBF16, DType::kBF16, DType::kF32}};
  return kAll;
}

// One array in both memories, made from the same host values: `got` in the tested backend's
// memory (in the tested dtype), `want` in the reference's (F32 for float data). An op runs on
// each side with that side's views; results meet only as host copies.
struct Pair {
  View got, want;
};

class Sides {
 public:
  Sides(const Backend& tested, const Backend& reference) : got_(tested), want_(reference) {}

  // Float data: the tested side in `dtype`, the reference in F32 (host values already rounded
  // to `dtype` by the caller, so both compute from the same numbers).
  Pair Data(const std::vector<float>& host, DType dtype, Shape shape = {}) {
    return {got_.Data(host, dtype, shape), want_.F32(host, shape)};
  }
  // F32 on both sides (stat and master arguments).
  Pair F32(const std::vector<float>& host, Shape shape = {}) {
    return {got_.F32(host, shape), want_.F32(host, shape)};
  }
  Pair I32(const std::vector<int32_t>& host, Shape shape = {}) {
    return {got_.I32(host, shape), want_.I32(host, shape)};
  }
  Pair U8(const std::vector<uint8_t>& host) { return {got_.U8(host), want_.U8(host)}; }
  Pair F64(double value) { return {got_.F64(value), want_.F64(value)}; }
  // The reference's current values of `p`, as a fresh pair (feeding one result to both sides'
  // next op: the tested side in `dtype`).
  Pair FromWant(const Pair& p, DType dtype) {
    return Data(want_.Get(p.want), dtype, p.want.shape());
  }
  // Index results: the reference's, on both sides.
  Pair I32FromWant(const Pair& p) { return I32(want_.GetI32(p.want), p.want.shape()); }

  std::vector<float> Got(const Pair& p) const { return got_.Get(p.got); }
  std::vector<float> Want(const Pair& p) const { return want_.Get(p.want); }
  std::vector<int32_t> GotI32(const Pair& p) const { return got_.GetI32(p.got); }
  std::vector<int32_t> WantI32(const Pair& p) const { return want_.GetI32(p.want); }
  std::vector<uint8_t> GotBytes(const Pair& p) const { return got_.GetU8(p.got); }
  std::vector<uint8_t> WantBytes(const Pair& p) const { return want_.GetU8(p.want); }
  double GotScalar(const Pair& p) const { return got_.Scalar(p.got); }
  double WantScalar(const Pair& p) const { return want_.Scalar(p.want); }
  // max |got - want| / (1 + max |want|).
  double Error(const Pair& p) const { return ScaledMaxDiff(Got(p), Want(p)); }

 private:
  DeviceArrays got_, want_;
};

class OpsHarness : public ::testing::TestWithParam<std::tuple<RegisteredBackend, Precision>> {
 protected:
  void SetUp() override {
    const RegisteredBackend& r = std::get<0>(GetParam());
    Result<std::shared_ptr<Backend>> made = CreateBackend(r.options);
    ASSERT_TRUE(made.ok()) << r.name << ": " << made.status().message();
    backend_ = std::move(made).value();
  }
  void TearDown() override {
    for (const auto& [family, worst] : worst_) {
      std::printf("[harness] %-12s %-13s %-20s worst %.3g (tolerance %.3g)\n",
                  std::get<0>(GetParam()).name.c_str(), precision().name.c_str(), family.c_str(),
                  worst.first, worst.second);
    }
  }
  const Precision& precision() const { return std::get<1>(GetParam()); }
  const BackendTolerances& tol() const {
    const RegisteredBackend& r = std::get<0>(GetParam());
    if (precision().name == "bf16") return r.bf16;
    if (precision().name == "bf16_f32grad") return r.bf16_f32grad;
    return r.f32;
  }
  // False (and a printed line) when the backend has no path for `op` in this precision.
  bool Runs(OpKind op) {
    if (backend_->Supports(op, precision().data())) return true;
    std::printf("[harness] %-12s %-13s %-20s not supported by this backend in %s (not run)\n",
                std::get<0>(GetParam()).name.c_str(), precision().name.c_str(), OpName(op),
                DTypeName(precision().data()));
    return false;
  }
  // Checks `measured` against `tolerance` for `family` and keeps the worst.
  void Expect(const std::string& family, double measured, double tolerance,
              const std::string& what) {
    auto& w = worst_[family];
    w = {std::max(w.first, measured), tolerance};
    EXPECT_LE(measured, tolerance)
        << std::get<0>(GetParam()).name << " " << precision().name << " " << family << " " << what;
  }
  // Host data as the tested dtype holds it (what both sides compute from).
  std::vector<float> In(size_t n, uint64_t seed, float scale = 1.0f) const {
    return RoundedTo(RandomVector(n, seed, scale), precision().in);
  }
  std::vector<float> Grad(size_t n, uint64_t seed, float scale = 1.0f) const {
    return RoundedTo(RandomVector(n, seed, scale), precision().grad);
  }

  ReferenceOps ref_;
  std::shared_ptr<Backend> backend_;
  std::map<std::string, std::pair<double, double>> worst_;
};

inline std::string CaseName(
    const ::testing::TestParamInfo<std::tuple<RegisteredBackend, Precision>>& info) {
  std::string name = std::get<0>(info.param).name + "_" + std::get<1>(info.param).name;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

}  // namespace air::engine::testing
