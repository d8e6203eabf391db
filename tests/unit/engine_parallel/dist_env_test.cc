// ReadDistEnv: the torchrun variables, srun's, their validation, and errors that name the
// variables and what would be valid.
#include "engine/parallel/dist_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "unit/vars_env.h"

namespace air::engine::parallel {
namespace {

using ::testing::HasSubstr;
using testing::VarsEnv;

Result<DistEnv> Read(std::map<std::string, std::string> vars) {
  VarsEnv env(std::move(vars));
  return ReadDistEnv(&env);
}

TEST(DistEnv, NothingSetIsOneProcess) {
  auto d = Read({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->world_size, 1);
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->launcher, "none");
}

TEST(DistEnv, TorchrunVariables) {
  auto d = Read({{"RANK", "3"},
                 {"WORLD_SIZE", "4"},
                 {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "2"},
                 {"GROUP_RANK", "1"},
                 {"MASTER_ADDR", "10.0.0.1"},
                 {"MASTER_PORT", "29500"},
                 {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                 {"TORCHELASTIC_RESTART_COUNT", "2"}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->rank, 3);
  EXPECT_EQ(d->world_size, 4);
  EXPECT_EQ(d->local_rank, 1);
  EXPECT_EQ(d->local_world_size, 2);
  EXPECT_EQ(d->node_rank, 1);
  EXPECT_EQ(d->master_addr, "10.0.0.1");
  EXPECT_EQ(d->master_port, 29500);
  EXPECT_TRUE(d->agent_store);
  EXPECT_EQ(d->restart_count, 2);
  EXPECT_EQ(d->launcher, "torchrun");
  EXPECT_EQ(DescribeDistEnv(*d),
            "rank 3 of 4 (local 1 of 2, node 1), store at 10.0.0.1:29500 hosted by the launcher");
}

TEST(DistEnv, InconsistentTorchrunValuesNameTheVariables) {
  std::map<std::string, std::string> base = {
      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"WORLD_SIZE", "2"}};
  auto with = [&](std::map<std::string, std::string> extra) {
    auto vars = base;
    for (auto& [k, v] : extra) vars[k] = v;
    return Read(vars);
  };
  EXPECT_THAT(with({{"RANK", "2"}}).status().message(),
              HasSubstr("RANK=2 is not valid with WORLD_SIZE=2: ranks are 0..1"));
  EXPECT_THAT(with({{"RANK", "x"}}).status().message(),
              HasSubstr("RANK=\"x\" is not valid: expected an integer >= 0"));
  EXPECT_THAT(with({{"RANK", "0"}, {"LOCAL_WORLD_SIZE", "4"}}).status().message(),
              HasSubstr("LOCAL_WORLD_SIZE=4 is larger than WORLD_SIZE=2"));
  EXPECT_THAT(
      with({{"RANK", "0"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}).status().message(),
      HasSubstr("LOCAL_RANK=2 is not valid with LOCAL_WORLD_SIZE=2"));
  EXPECT_THAT(with({{"RANK", "0"}, {"MASTER_PORT", "70000"}}).status().message(),
              HasSubstr("MASTER_PORT=70000 is not valid: expected a TCP port 1-65535"));
  EXPECT_THAT(Read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}).status().message(),
              HasSubstr("MASTER_ADDR is not set"));
  EXPECT_THAT(Read({{"RANK", "0"}}).status().message(), HasSubstr("WORLD_SIZE is not set"));
  EXPECT_THAT(Read({{"WORLD_SIZE", "4"}}).status().message(),
              HasSubstr("WORLD_SIZE=4 but RANK is not set"));
}

TEST(DistEnv, SrunTask) {
  auto d = Read({{"SLURM_STEP_ID", "0"},
                 {"SLURM_PROCID", "3"},
                 {"SLURM_NTASKS", "4"},
                 {"SLURM_LOCALID", "1"},
                 {"SLURM_NODEID", "1"},
                 {"SLURM_STEP_NUM_NODES", "2"},
                 {"MASTER_ADDR", "node0"},
                 {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->launcher, "slurm");
  EXPECT_EQ(d->rank, 3);
  EXPECT_EQ(d->world_size, 4);
  EXPECT_EQ(d->local_rank, 1);
  EXPECT_EQ(d->local_world_size, 2);
  EXPECT_EQ(d->node_rank, 1);
  EXPECT_FALSE(d->agent_store);
}

TEST(DistEnv, SrunWorldSizeMustMatchItsTasks) {
  auto d = Read({{"SLURM_STEP_ID", "0"},
                 {"SLURM_PROCID", "0"},
                 {"SLURM_NTASKS", "2"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURM_NODEID", "0"},
                 {"SLURM_NNODES", "1"},
                 {"WORLD_SIZE", "4"},
                 {"MASTER_ADDR", "node0"},
                 {"MASTER_PORT", "29500"}});
  EXPECT_THAT(d.status().message(), HasSubstr("WORLD_SIZE=4 contradicts SLURM_NTASKS=2"));
  auto uneven = Read({{"SLURM_STEP_ID", "0"},
                      {"SLURM_PROCID", "0"},
                      {"SLURM_NTASKS", "3"},
                      {"SLURM_LOCALID", "0"},
                      {"SLURM_NODEID", "0"},
                      {"SLURM_NNODES", "2"},
                      {"MASTER_ADDR", "node0"},
                      {"MASTER_PORT", "29500"}});
  EXPECT_THAT(uneven.status().message(), HasSubstr("SLURM_NTASKS=3 over 2 nodes"));
}

TEST(DistEnv, TorchrunUnderSrunUsesTorchrunsRanks) {
  // srun starting one torchrun per node: the workers see both sets; torchrun's win.
  auto d = Read({{"SLURM_STEP_ID", "0"},
                 {"SLURM_PROCID", "1"},
                 {"SLURM_NTASKS", "2"},
                 {"RANK", "5"},
                 {"WORLD_SIZE", "8"},
                 {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "4"},
                 {"MASTER_ADDR", "node0"},
                 {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->launcher, "torchrun");
  EXPECT_EQ(d->rank, 5);
  EXPECT_EQ(d->world_size, 8);
  EXPECT_EQ(d->node_rank, 1);
}

TEST(DistEnv, AirRunNodeWithOneWorkerPerNode) {
  auto d = Read({{"NUM_NODES", "2"},
                 {"NODE_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "1"},
                 {"WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->launcher, "air run");
  EXPECT_EQ(d->rank, 1);
  EXPECT_EQ(d->world_size, 2);
  EXPECT_EQ(d->node_rank, 1);
  auto several = Read({{"NUM_NODES", "2"},
                       {"NODE_RANK", "0"},
                       {"LOCAL_WORLD_SIZE", "2"},
                       {"WORLD_SIZE", "4"},
                       {"MASTER_ADDR", "127.0.0.1"},
                       {"MASTER_PORT", "29500"}});
  EXPECT_THAT(several.status().message(),
              HasSubstr("LOCAL_WORLD_SIZE=2 workers per node but RANK is not set: start them "
                        "with `air launch"));
  // The quickstart's single node: one process.
  auto single = Read({{"NUM_NODES", "1"}, {"NODE_RANK", "0"}, {"WORLD_SIZE", "1"}});
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_EQ(single->world_size, 1);
}

}  // namespace
}  // namespace air::engine::parallel
