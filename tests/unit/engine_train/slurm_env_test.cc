// SLURM_* task variables -> torchrun's (engine/parallel/slurm_env.h), on the values srun sets.
#include "engine/parallel/slurm_env.h"

#include <gtest/gtest.h>

#include <map>

namespace air::engine::parallel {
namespace {

EnvLookup From(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::map<std::string, std::string> AsMap(
    const std::vector<std::pair<std::string, std::string>>& v) {
  return {v.begin(), v.end()};
}

TEST(SlurmEnvTest, TaskThreeOfFourOnTwoNodes) {
  auto vars = TorchrunVariablesFromSlurm(From({{"SLURM_PROCID", "3"},
                                               {"SLURM_LOCALID", "1"},
                                               {"SLURM_NTASKS", "4"},
                                               {"SLURM_NODEID", "1"},
                                               {"SLURM_NNODES", "2"},
                                               {"SLURM_TASKS_PER_NODE", "2(x2)"},
                                               {"SLURM_LAUNCH_NODE_IPADDR", "10.0.0.1"},
                                               {"SLURM_JOB_ID", "123456"}}));
  ASSERT_TRUE(vars.ok()) << vars.status().message();
  EXPECT_EQ(AsMap(*vars), (std::map<std::string, std::string>{{"RANK", "3"},
                                                              {"LOCAL_RANK", "1"},
                                                              {"WORLD_SIZE", "4"},
                                                              {"LOCAL_WORLD_SIZE", "2"},
                                                              {"NODE_RANK", "1"},
                                                              {"GROUP_RANK", "1"},
                                                              {"NUM_NODES", "2"},
                                                              {"MASTER_ADDR", "10.0.0.1"},
                                                              {"MASTER_PORT", "33456"}}));
}

TEST(SlurmEnvTest, WhatTorchrunOrTheUserSetWins) {
  auto vars = TorchrunVariablesFromSlurm(From({{"SLURM_PROCID", "0"},
                                               {"SLURM_LOCALID", "0"},
                                               {"SLURM_NTASKS", "1"},
                                               {"SLURM_NODEID", "0"},
                                               {"SLURM_NNODES", "1"},
                                               {"SLURM_TASKS_PER_NODE", "1"},
                                               {"MASTER_ADDR", "node1"},
                                               {"MASTER_PORT", "29500"},
                                               {"RANK", "0"}}));
  ASSERT_TRUE(vars.ok());
  auto map = AsMap(*vars);
  EXPECT_EQ(map.count("MASTER_ADDR"), 0u);
  EXPECT_EQ(map.count("MASTER_PORT"), 0u);
  EXPECT_EQ(map.count("RANK"), 0u);
  EXPECT_EQ(map["WORLD_SIZE"], "1");
}

TEST(SlurmEnvTest, NotUnderSrunOrMalformed) {
  auto none = TorchrunVariablesFromSlurm(From({}));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto bad = TorchrunVariablesFromSlurm(From({{"SLURM_PROCID", "x"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SLURM_PROCID=x: expected a number"), std::string::npos);
}

TEST(SlurmEnvTest, TasksPerNodeRuns) {
  EXPECT_EQ(TasksOnNode("2(x3),1", 0), 2);
  EXPECT_EQ(TasksOnNode("2(x3),1", 2), 2);
  EXPECT_EQ(TasksOnNode("2(x3),1", 3), 1);
  EXPECT_EQ(TasksOnNode("2(x3),1", 4), std::nullopt);
  EXPECT_EQ(TasksOnNode("4", 0), 4);
  EXPECT_EQ(TasksOnNode("x", 0), std::nullopt);
}

}  // namespace
}  // namespace air::engine::parallel
