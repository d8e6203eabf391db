// The backend contract beyond the ops (backend/backend.h), on every backend this machine can
// run: events, pinned-host (HostBuffer) copies queued and waited for, stream-ordered frees,
// the memory query, a view of another device's memory refused by name; and the registry
// (backend/registry.h): its kinds and devices, the errors for a device this build or machine
// cannot use, the backends it cannot run listed with their reason, and every backend able to
// run every op the models use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <numeric>

#include "engine/backend/registry.h"
#include "engine/model/model_factory.h"
#include "gpt_oss_fixture.h"
#include "op_test_util.h"
#include "test_util.h"
#include "unit/engine_train/tiny_llama.h"

namespace air::engine {
namespace {

using testing::DeviceArrays;

class BackendContract : public ::testing::TestWithParam<RegisteredBackend> {
 protected:
  void SetUp() override { backend_ = std::move(CreateBackend(GetParam().options)).value(); }
  std::shared_ptr<Backend> backend_;
};

std::string ContractName(const ::testing::TestParamInfo<RegisteredBackend>& info) {
  std::string name = info.param.name;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

TEST_P(BackendContract, PinnedCopiesAreOrderedByEvents) {
  const int64_t n = 100003;
  auto staging = backend_->AllocateHost(2 * n * sizeof(float));
  ASSERT_TRUE(staging.ok()) << staging.status().message();
  HostBuffer& host = **staging;
  ASSERT_GE(host.bytes(), 2 * n * sizeof(float));
  float* values = static_cast<float*>(host.data());
  std::iota(values, values + n, 1.0f);
  View a, b;
  auto a_buffer = backend_->AllocateView(DType::kF32, {n}, &a);
  auto b_buffer = backend_->AllocateView(DType::kF32, {n}, &b);
  ASSERT_TRUE(a_buffer.ok() && b_buffer.ok());
  // Up, a device op, down: all queued, then one event after the last.
  backend_->CopyToDeviceAsync(a, host, 0);
  backend_->Copy(b, a);
  backend_->Scale(b, 2.0f);
  backend_->CopyToHostAsync(host, n * sizeof(float), b);
  const std::unique_ptr<Event> done = backend_->RecordEvent();
  done->Synchronize();
  EXPECT_TRUE(done->Done());
  const float* back = values + n;
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 2.0f * static_cast<float>(i + 1)) << i;
}

TEST_P(BackendContract, AnotherBackendOfTheDeviceWaitsForAnEvent) {
  // A second backend of the same device (a communication stream beside the compute one) reads
  // what the first wrote once it waits for the first's event.
  const std::shared_ptr<Backend> other = std::move(CreateBackend(GetParam().options)).value();
  const int64_t n = 4099;
  DeviceArrays d(*backend_);
  const View x = d.F32(std::vector<float>(n, 1.5f));
  View y;
  auto y_buffer = other->AllocateView(DType::kF32, {n}, &y);
  ASSERT_TRUE(y_buffer.ok());
  backend_->Scale(x, 4.0f);
  const std::unique_ptr<Event> written = backend_->RecordEvent();
  other->WaitEvent(*written);
  other->Copy(y, x);
  std::vector<float> got(static_cast<size_t>(n));
  other->CopyToHost(got.data(), y);
  EXPECT_EQ(got, std::vector<float>(static_cast<size_t>(n), 6.0f));
}

TEST_P(BackendContract, AFreeIsOrderedAfterTheWorkQueuedBeforeIt) {
  // A buffer dropped right after the op that reads it, and a new one allocated at once (it may
  // get the same memory): the op saw the old values, the new buffer gets the new ones.
  const int64_t n = 1 << 20;
  DeviceArrays d(*backend_);
  const View out = d.F32(std::vector<float>(n, 0.0f));
  for (int round = 0; round < 4; ++round) {
    View in;
    auto in_buffer = backend_->AllocateView(DType::kF32, {n}, &in);
    ASSERT_TRUE(in_buffer.ok());
    backend_->Fill(in, static_cast<float>(round + 1));
    backend_->AddInPlace(out, in);
    in_buffer->reset();  // freed while (on a GPU) the add may still be queued
  }
  const std::vector<float> sums = d.Get(out);
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(sums[static_cast<size_t>(i)], 10.0f) << i;
}

TEST_P(BackendContract, StatesItsMemoryAndItself) {
  const Result<DeviceMemory> memory = backend_->QueryMemory();
  ASSERT_TRUE(memory.ok()) << memory.status().message();
  EXPECT_GT(memory->total_bytes, 0u);
  EXPECT_LE(memory->free_bytes, memory->total_bytes);
  EXPECT_FALSE(backend_->Describe().empty());
  std::printf("[backend] %s: %s; %.1f of %.1f GiB free\n", GetParam().name.c_str(),
              backend_->Describe().c_str(), memory->free_bytes / 1073741824.0,
              memory->total_bytes / 1073741824.0);
  EXPECT_EQ(backend_->device(), GetParam().options.device);
}

TEST_P(BackendContract, CountsTheBytesOfItsBuffersAndTheirPeak) {
  const AllocationStats before = backend_->allocation_stats();
  constexpr size_t kMiB = 1 << 20;
  auto one = backend_->Allocate(kMiB);
  auto two = backend_->Allocate(2 * kMiB);
  ASSERT_TRUE(one.ok() && two.ok());
  AllocationStats now = backend_->allocation_stats();
  EXPECT_EQ(now.in_use_bytes, before.in_use_bytes + 3 * kMiB);
  EXPECT_GE(now.peak_bytes, before.in_use_bytes + 3 * kMiB);
  two->reset();  // a stream-ordered free counts when it is queued
  now = backend_->allocation_stats();
  EXPECT_EQ(now.in_use_bytes, before.in_use_bytes + kMiB);
  EXPECT_GE(now.peak_bytes, before.in_use_bytes + 3 * kMiB);
  backend_->ResetPeakAllocation();
  EXPECT_EQ(backend_->allocation_stats().peak_bytes, before.in_use_bytes + kMiB);
  one->reset();
  EXPECT_EQ(backend_->allocation_stats().in_use_bytes, before.in_use_bytes);
}

TEST_P(BackendContract, AViewOfAnotherDevicesMemoryIsRefusedByName) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // re-executes: safe after CUDA's init too
  const Device elsewhere = backend_->device().type == DeviceType::kCpu
                               ? Device{DeviceType::kCuda, 0}
                               : Device{DeviceType::kCpu, 0};
  const BackendOptions options = GetParam().options;
  auto scale_a_foreign_view = [&options, elsewhere] {
    const std::shared_ptr<Backend> backend = std::move(CreateBackend(options)).value();
    float host[4] = {1, 2, 3, 4};
    // A buffer that claims another device (never dereferenced: the check comes first).
    Buffer foreign(nullptr, elsewhere, host, sizeof host);
    backend->Scale(View(&foreign, 0, DType::kF32, {4}), 2.0f);
  };
  EXPECT_DEATH(scale_a_foreign_view(),
               "Scale: argument x: a view of " + elsewhere.ToString() + " memory reached the " +
                   backend_->name() + " backend, which runs on " + backend_->device().ToString());
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendContract, ::testing::ValuesIn(RegisteredBackends(2)),
                         ContractName);

// ---- the registry ------------------------------------------------------------------------

TEST(BackendRegistry, CreatesTheCpuKindsAndParsesDevices) {
  EXPECT_EQ((*CreateBackend({"reference", 0}))->name(), "reference");
  EXPECT_EQ((*CreateBackend({"fast", 2}))->name(), "fast");
  EXPECT_EQ((*CreateBackend(ForDevice(Device{})))->name(), "fast");
  const Status unknown = CreateBackend({"tpu", 0}).status();
  EXPECT_EQ(unknown.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("valid backends are " + KnownBackendKinds()), std::string::npos)
      << unknown.message();
  EXPECT_EQ(KnownBackendKinds(), BuiltWithCuda() ? "cuda, fast, reference" : "fast, reference");
  EXPECT_EQ(IsKnownBackendKind("cuda"), BuiltWithCuda());
  EXPECT_EQ(ParseDevice("cpu")->ToString(), "cpu");
  EXPECT_EQ(ParseDevice("cuda")->ToString(), "cuda:0");
  EXPECT_EQ(ParseDevice("cuda:3")->ToString(), "cuda:3");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "CUDA:0"}) {
    const Status s = ParseDevice(bad).status();
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("valid devices are cpu, cuda, cuda:N"), std::string::npos) << bad;
  }
  // A CPU kind asked for a GPU is an error, not a silent CPU backend.
  const Status cpu_on_gpu =
      CreateBackend({.kind = "reference", .device = Device{DeviceType::kCuda, 0}}).status();
  EXPECT_FALSE(cpu_on_gpu.ok());
}

TEST(BackendRegistry, NamesWhatIsMissingForCudaAndListsWhatItCannotRun) {
  const std::vector<RegisteredBackend> registered = RegisteredBackends(2);
  ASSERT_GE(registered.size(), 2u);
  EXPECT_EQ(registered[0].name, "reference");
  EXPECT_EQ(registered[1].name.rfind("fast/", 0), 0u);
  const bool gpu_here = std::any_of(registered.begin(), registered.end(),
                                    [](const RegisteredBackend& r) { return r.name == "cuda:0"; });
  std::vector<UnavailableBackend> unavailable;
  for (const UnavailableBackend& u : UnavailableBackends()) {
    std::printf("[backend] %s: not run on this machine: %s\n", u.name.c_str(), u.why.c_str());
    // The fast backend's bf16 GEMM paths this CPU cannot run (gemm_path_test.cc checks them).
    if (u.name.rfind("fast/gemm=", 0) != 0) unavailable.push_back(u);
  }
  const Result<std::shared_ptr<Backend>> cuda =
      CreateBackend(ForDevice(Device{DeviceType::kCuda, 0}));
  if (gpu_here) {
    EXPECT_TRUE(unavailable.empty());
    ASSERT_TRUE(cuda.ok()) << cuda.status().message();
    EXPECT_EQ((*cuda)->name(), "cuda");
    // An index past the visible GPUs names how many there are.
    const Status beyond = CreateBackend(ForDevice(Device{DeviceType::kCuda, 4096})).status();
    EXPECT_EQ(beyond.code(), ErrorCode::kInvalidArgument) << beyond.message();
    EXPECT_NE(beyond.message().find("visible"), std::string::npos) << beyond.message();
    return;
  }
  // No GPU here: exactly one backend is listed as unavailable, cuda, and asking for it says why
  // and names the CPU path.
  ASSERT_EQ(unavailable.size(), 1u);
  EXPECT_EQ(unavailable[0].name, "cuda");
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(cuda.status().message().find("device: cpu"), std::string::npos)
      << cuda.status().message();
  if (BuiltWithCuda()) {
    EXPECT_NE(cuda.status().message().find("CUDA"), std::string::npos) << cuda.status().message();
  } else {
    EXPECT_NE(cuda.status().message().find("built without the CUDA backend"), std::string::npos)
        << cuda.status().message();
  }
}

// Every backend this machine can run supports every op each model uses, in each compute dtype,
// and the optimizer's master-state ops in F32: a registered backend that lacks one fails here,
// instead of a model failing to build on it.
TEST(BackendCoverage, EveryBackendSupportsEveryOpTheModelsUse) {
  ModelConfig llama = air::testing::TinyLlamaConfig(1);  // with biases: every Llama op
  llama.attention_bias = true;
  llama.mlp_bias = true;
  for (const RegisteredBackend& r : RegisteredBackends(1)) {
    const std::shared_ptr<Backend> backend = std::move(CreateBackend(r.options)).value();
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (const ModelConfig& config : {llama, testing::TinyGptOssConfig()}) {
        ModelOptions options;
        options.compute_dtype = dtype;
        options.deferred_storage = true;
        const auto model = CreateModel(config, backend, options);
        ASSERT_TRUE(model.ok()) << r.name << " " << DTypeName(dtype) << ": "
                                << model.status().message();
      }
    }
    const OpKind master[] = {OpKind::kAdamWUpdate, OpKind::kSumOfSquares, OpKind::kScale,
                             OpKind::kConvert};
    EXPECT_TRUE(CheckOpsSupport(*backend, master, DType::kF32, "the optimizer").ok()) << r.name;
  }
}

}  // namespace
}  // namespace air::engine
