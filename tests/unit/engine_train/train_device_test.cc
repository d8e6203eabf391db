// The `device` parameter of `air train` (engine/train/train_device.h): its values, and every
// refusal — no usable GPU (naming the CPU path), LOCAL_RANK past the visible GPUs, cuda:N past
// them, several ranks on one GPU under NCCL, NCCL on the CPU — given a GPU count, so each is
// checked on a machine without a GPU; and on this machine, what asking for the GPU says.
#include "engine/train/train_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/backend/registry.h"

namespace air::engine::train {
namespace {

using ::testing::HasSubstr;

TrainConfig WithDevice(const std::string& device) {
  auto config = ParseTrainConfig(
      "model_name: m\ndataset_name: d.jsonl\noutput_dir: out\ndevice: " + device + "\n", "t.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return *config;
}

parallel::DistEnv Ranks(int world, int local_world, int local_rank) {
  parallel::DistEnv d;
  d.world_size = world;
  d.local_world_size = local_world;
  d.local_rank = local_rank;
  d.rank = local_rank;
  return d;
}

TEST(TrainDevice, TheParameterTakesCpuCudaCudaNAndAuto) {
  for (const char* ok : {"cpu", "cuda", "cuda:0", "cuda:7", "auto"}) {
    EXPECT_EQ(WithDevice(ok).device, ok);
  }
  EXPECT_EQ(ParseTrainConfig("model_name: m\ndataset_name: d\noutput_dir: o\n", "t.yaml")->device,
            "cpu");
  const Status bad =
      ParseTrainConfig("model_name: m\ndataset_name: d\noutput_dir: o\ndevice: gpu\n", "t.yaml")
          .status();
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("t.yaml:4:1: device: 'gpu' is not a device; valid: cpu, "
                                       "cuda, cuda:N, auto"));
  const Status mpi =
      ParseTrainConfig("model_name: m\ndataset_name: d\noutput_dir: o\nddp_backend: mpi\n",
                       "t.yaml")
          .status();
  EXPECT_THAT(mpi.message(), HasSubstr("t.yaml:4:1: ddp_backend: 'mpi' is not a backend air runs; "
                                       "valid: nccl (GPUs), gloo"));
}

TEST(TrainDevice, EachRankTakesTheGpuOfItsLocalRank) {
  std::string note;
  const Result<int> four = 4;
  EXPECT_EQ(ChooseTrainingDevice(WithDevice("cuda"), Ranks(1, 1, 0), four, &note)->ToString(),
            "cuda:0");
  EXPECT_EQ(ChooseTrainingDevice(WithDevice("cuda:3"), Ranks(1, 1, 0), four, &note)->ToString(),
            "cuda:3");
  EXPECT_EQ(ChooseTrainingDevice(WithDevice("auto"), Ranks(1, 1, 0), four, &note)->ToString(),
            "cuda:0");
  EXPECT_EQ(ChooseTrainingDevice(WithDevice("cpu"), Ranks(8, 8, 5), four, &note)->ToString(),
            "cpu");
  EXPECT_TRUE(note.empty());
}

TEST(TrainDevice, EveryRefusalNamesTheParameterAndTheWayOut) {
  std::string note;
  const Result<int> one = 1;
  // LOCAL_RANK past the visible GPUs.
  Status s = ChooseTrainingDevice(WithDevice("cuda"), Ranks(1, 2, 1), one, &note).status();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("t.yaml:4:1: device: LOCAL_RANK 1 has no GPU: 1 CUDA device is "
                        "visible"));
  EXPECT_THAT(s.message(), HasSubstr("run at most 1 rank per node"));
  // cuda:N past them.
  s = ChooseTrainingDevice(WithDevice("cuda:2"), Ranks(1, 1, 0), one, &note).status();
  EXPECT_THAT(s.message(), HasSubstr("cuda:2 does not exist: 1 CUDA device is visible"));
  // Every local rank on one GPU: NCCL refuses that; gloo staged through the host takes it.
  s = ChooseTrainingDevice(WithDevice("cuda:0"), Ranks(2, 2, 0), Result<int>(2), &note).status();
  EXPECT_THAT(s.message(), HasSubstr("puts all 2 ranks of this node on one GPU, which NCCL "
                                     "refuses"));
  EXPECT_THAT(s.message(), HasSubstr("ddp_backend: gloo"));
  TrainConfig staged = WithDevice("cuda:0");
  staged.ddp_backend = "gloo";
  EXPECT_EQ(ChooseTrainingDevice(staged, Ranks(2, 2, 1), Result<int>(1), &note)->ToString(),
            "cuda:0");
  // Several ranks, one GPU each (NCCL).
  EXPECT_EQ(
      ChooseTrainingDevice(WithDevice("cuda"), Ranks(8, 8, 5), Result<int>(8), &note)->ToString(),
      "cuda:5");
  // NCCL on the CPU.
  TrainConfig nccl_on_cpu = WithDevice("cpu");
  nccl_on_cpu.ddp_backend = "nccl";
  s = ChooseTrainingDevice(nccl_on_cpu, Ranks(2, 2, 0), Result<int>(0), &note).status();
  EXPECT_THAT(s.message(), HasSubstr("ddp_backend: nccl runs between GPUs, and device is cpu"));
  // No usable GPU: the probe's reason, and the CPU path.
  const Result<int> none = FailedPrecondition(
      "no usable CUDA device: no driver; train on the "
      "CPU with device: cpu");
  s = ChooseTrainingDevice(WithDevice("cuda"), Ranks(1, 1, 0), none, &note).status();
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("t.yaml:4:1: device: no usable CUDA device: no driver"));
  s = ChooseTrainingDevice(WithDevice("cuda"), Ranks(1, 1, 0), Result<int>(0), &note).status();
  EXPECT_THAT(s.message(), HasSubstr("no CUDA device is visible"));
  EXPECT_THAT(s.message(), HasSubstr("device: cpu"));
  // auto without a GPU trains on the CPU and says why.
  const Result<Device> fallback =
      ChooseTrainingDevice(WithDevice("auto"), Ranks(1, 1, 0), none, &note);
  ASSERT_TRUE(fallback.ok());
  EXPECT_EQ(fallback->ToString(), "cpu");
  EXPECT_THAT(note, HasSubstr("device: auto trains on the CPU: no usable CUDA device"));
}

TEST(TrainDevice, OnThisMachineTheGpuIsUsedOrItsAbsenceExplained) {
  const Result<TrainingDevice> cuda = ResolveTrainingDevice(WithDevice("cuda"), Ranks(1, 1, 0));
  if (VisibleGpuCount().ok()) {
    ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
    EXPECT_EQ(cuda->device.ToString(), "cuda:0");
    ASSERT_NE(cuda->gpu, nullptr);
    EXPECT_GT(cuda->memory.total_bytes, 0u);
    std::printf("[device] %s\n", cuda->description.c_str());
    return;
  }
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_THAT(cuda.status().message(), HasSubstr("t.yaml:4:1: device: "));
  EXPECT_THAT(cuda.status().message(), HasSubstr("device: cpu"));
  std::printf("[device] device: cuda here: %s\n", cuda.status().message().c_str());
  const Result<TrainingDevice> automatic =
      ResolveTrainingDevice(WithDevice("auto"), Ranks(1, 1, 0));
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ(automatic->device.type, DeviceType::kCpu);
  EXPECT_EQ(automatic->gpu, nullptr);
  EXPECT_THAT(automatic->note, HasSubstr("device: auto trains on the CPU"));
}

}  // namespace
}  // namespace air::engine::train
