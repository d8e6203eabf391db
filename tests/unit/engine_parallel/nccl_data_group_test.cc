// The NCCL data group (engine/parallel/nccl_data_group.h) at world size 1 on one GPU — NCCL
// refuses two ranks on one device, so this is what one GPU can check: the bootstrap through the
// rendezvous store, each collective on device memory ordered after the compute stream's work
// and before what follows it, bf16 and fp32. Where no GPU is usable it says why; the refusal of a
// build without CUDA is checked everywhere.
#include "engine/parallel/nccl_data_group.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/backend/registry.h"
#include "engine/parallel/tcp_store.h"

namespace air::engine::parallel {
namespace {

TEST(NcclDataGroup, AWorldOfOneGathersReducesAndOrdersOnOneGpu) {
  if (!BuiltWithCuda()) {
    auto cpu = *CreateBackend({.kind = "reference"});
    DistEnv dist;
    const Status refused = NcclDataGroup(dist, *cpu, cpu).status();
    EXPECT_EQ(refused.code(), ErrorCode::kFailedPrecondition) << refused.message();
    GTEST_SKIP() << "not run: this build has no CUDA backend; " << refused.message();
  }
  const Result<int> gpus = VisibleGpuCount();
  if (!gpus.ok()) GTEST_SKIP() << "not run here, no GPU: " << gpus.status().message();
  auto server = TcpStoreServer::Start(0);
  ASSERT_TRUE(server.ok()) << server.status().message();
  DistEnv dist;
  dist.master_addr = "127.0.0.1";
  dist.master_port = (*server)->port();
  const BackendOptions gpu = ForDevice(Device{DeviceType::kCuda, 0});
  std::shared_ptr<Backend> compute = *CreateBackend(gpu), comm = *CreateBackend(gpu);
  auto group = NcclDataGroup(dist, *compute, comm, {.name = "test"});
  ASSERT_TRUE(group.ok()) << group.status().message();
  EXPECT_EQ((*group)->size(), 1);
  EXPECT_STREQ((*group)->name(), "nccl");
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    const int64_t n = 4097;
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i % 97);
    View a, b;
    auto a_buffer = compute->AllocateView(dtype, {n}, &a);
    auto b_buffer = compute->AllocateView(dtype, {n}, &b);
    ASSERT_TRUE(a_buffer.ok() && b_buffer.ok());
    compute->FromHostTensor(a, values.data());
    compute->Fill(b, -1.0f);
    // Queued after the upload on the compute stream; the read below after the collective.
    ASSERT_TRUE((*group)->AllGather(a, b)->Wait().ok());
    Tensor got = compute->ToHostTensor(b);
    EXPECT_EQ(std::vector<float>(got.values().begin(), got.values().end()), values)
        << DTypeName(dtype);
    compute->Fill(b, -1.0f);
    ASSERT_TRUE((*group)->ReduceScatter(a, b)->Wait().ok());
    got = compute->ToHostTensor(b);
    EXPECT_EQ(std::vector<float>(got.values().begin(), got.values().end()), values);
    compute->Scale(a, 1.0f);  // compute work between two collectives
    ASSERT_TRUE((*group)->AllReduce(a)->Wait().ok());
    got = compute->ToHostTensor(a);
    EXPECT_EQ(std::vector<float>(got.values().begin(), got.values().end()), values);
  }
}

}  // namespace
}  // namespace air::engine::parallel
