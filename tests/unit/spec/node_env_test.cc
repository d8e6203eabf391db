// The per-node environment: order, values at launch and in a dry run, secrets masked.
#include "spec/node_env.h"

#include <gtest/gtest.h>

#include "spec/parser.h"
#include "spec_test_util.h"

namespace air::spec {
namespace {

WorkloadSpec Seed() {
  LoadReport report;
  Result<WorkloadSpec> spec =
      LoadWorkloadSpec((testing::SourceDir() / "examples/multinode_llm_sft/train.yaml").string(),
                       {}, DefaultEnv(), &report);
  EXPECT_TRUE(spec.ok());
  return spec.ok() ? *spec : WorkloadSpec{};
}

std::vector<std::string> Lines(const std::vector<EnvVar>& env) {
  std::vector<std::string> out;
  for (const auto& v : env) out.push_back(v.name + "=" + v.value);
  return out;
}

TEST(NodeEnvironment, LaunchValuesInContractOrder) {
  WorkloadSpec spec = Seed();
  LaunchContext launch;
  launch.run_id = "42";
  launch.attempt = 1;
  launch.master_addr = "127.0.0.1";
  launch.master_port = 29501;
  launch.code_source_path = "/runs/42/node_1/code";
  launch.hyperparameters_path = "/runs/42/parameters.yaml";
  launch.mlflow_run_id = "abc123";
  std::vector<EnvVar> env = BuildNodeEnvironment(spec, launch, 1);
  EXPECT_EQ(Lines(env), (std::vector<std::string>{
                            "NUM_NODES=2", "NODE_RANK=1", "LOCAL_WORLD_SIZE=8", "WORLD_SIZE=16",
                            "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29501",
                            "CODE_SOURCE_PATH=/runs/42/node_1/code",
                            "HYPERPARAMETERS_PATH=/runs/42/parameters.yaml", "MLFLOW_RUN_ID=abc123",
                            "MLFLOW_EXPERIMENT_NAME=air-multinode-llama-sft", "AIR_RUN_ID=42",
                            "AIR_ATTEMPT=1", "PYTHONUNBUFFERED=1", "NCCL_SOCKET_IFNAME=eth0",
                            "HF_HOME=/tmp/hf", "HF_TOKEN=[REDACTED]"}));
  EXPECT_TRUE(env.back().is_secret);
  EXPECT_FALSE(env.front().is_secret);
}

TEST(NodeEnvironment, DryRunShowsPlaceholdersAndNoHyperparametersWithoutParameters) {
  WorkloadSpec spec = Seed();
  spec.parameters_yaml.reset();
  spec.mlflow_experiment_directory = "/Users/me/exps/";
  std::vector<EnvVar> env = BuildNodeEnvironment(spec, DryRunLaunchContext(), 0);
  std::vector<std::string> lines = Lines(env);
  auto has = [&](const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  };
  EXPECT_TRUE(has("MASTER_PORT=<assigned at launch>"));
  EXPECT_TRUE(has("AIR_RUN_ID=<assigned at launch>"));
  EXPECT_TRUE(has("AIR_ATTEMPT=0"));
  EXPECT_TRUE(has("MLFLOW_EXPERIMENT_NAME=/Users/me/exps/air-multinode-llama-sft"));
  for (const auto& v : env) EXPECT_NE(v.name, "HYPERPARAMETERS_PATH");
}

TEST(NodeEnvironment, ReservedNames) {
  EXPECT_TRUE(IsReservedEnvironmentName("NODE_RANK"));
  EXPECT_TRUE(IsReservedEnvironmentName("CUDA_VISIBLE_DEVICES"));
  EXPECT_TRUE(IsReservedEnvironmentName("AIR_ANYTHING"));
  EXPECT_FALSE(IsReservedEnvironmentName("HF_HOME"));
  EXPECT_FALSE(IsReservedEnvironmentName("RANK"));  // set by torchrun for its workers, not by air
  // Everything BuildNodeEnvironment sets itself is reserved.
  WorkloadSpec spec = Seed();
  for (const auto& v : BuildNodeEnvironment(spec, DryRunLaunchContext(), 0)) {
    bool user_given = v.name == "NCCL_SOCKET_IFNAME" || v.name == "HF_HOME" || v.name == "HF_TOKEN";
    EXPECT_EQ(IsReservedEnvironmentName(v.name), !user_given) << v.name;
  }
}

}  // namespace
}  // namespace air::spec
