// air launch's option checks and the worker environment (torchrun's contract; the comparison
// with the real torchrun is tests/python/test_launch.py).
#include "launch/launch_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "unit/vars_env.h"

namespace air::launch {
namespace {

using ::testing::HasSubstr;
using testing::VarsEnv;

std::map<std::string, std::string> AsMap(
    const std::vector<std::pair<std::string, std::string>>& v) {
  return {v.begin(), v.end()};
}

TEST(LaunchOptions, WorkerEnvironmentIsTorchrunsContract) {
  LaunchOptions o;
  o.nnodes = 2;
  o.node_rank = 1;
  o.nproc_per_node = 2;
  o.master_addr = "10.0.0.1";
  o.master_port = 29400;
  o.max_restarts = 3;
  o.command = {"train.py"};
  VarsEnv env({});
  ASSERT_TRUE(ResolveLaunchOptions(&env, o).ok());
  auto vars = AsMap(WorkerEnvironment(o, 1, 2, "/tmp/e.json", &env));
  EXPECT_EQ(vars["RANK"], "3");
  EXPECT_EQ(vars["LOCAL_RANK"], "1");
  EXPECT_EQ(vars["WORLD_SIZE"], "4");
  EXPECT_EQ(vars["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(vars["GROUP_RANK"], "1");
  EXPECT_EQ(vars["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(vars["ROLE_RANK"], "3");
  EXPECT_EQ(vars["ROLE_WORLD_SIZE"], "4");
  EXPECT_EQ(vars["ROLE_NAME"], "default");
  EXPECT_EQ(vars["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(vars["MASTER_PORT"], "29400");
  EXPECT_EQ(vars["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(vars["TORCHELASTIC_MAX_RESTARTS"], "3");
  EXPECT_EQ(vars["TORCHELASTIC_RUN_ID"], "none");
  EXPECT_EQ(vars["TORCHELASTIC_USE_AGENT_STORE"], "True");
  EXPECT_EQ(vars["TORCHELASTIC_ERROR_FILE"], "/tmp/e.json");
  EXPECT_EQ(vars["OMP_NUM_THREADS"], "1");
  EXPECT_EQ(WorkerArgv(o), (std::vector<std::string>{"python3", "-u", "train.py"}));
}

TEST(LaunchOptions, OmpNumThreadsIsKeptWhenSetOrOneWorker) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {"x"};
  VarsEnv set(std::map<std::string, std::string>{{"OMP_NUM_THREADS", "4"}});
  EXPECT_EQ(AsMap(WorkerEnvironment(o, 0, 0, "e", &set)).count("OMP_NUM_THREADS"), 0u);
  o.nproc_per_node = 1;
  VarsEnv unset({});
  EXPECT_EQ(AsMap(WorkerEnvironment(o, 0, 0, "e", &unset)).count("OMP_NUM_THREADS"), 0u);
}

TEST(LaunchOptions, BadCombinationsNameTheFlag) {
  VarsEnv env({});
  auto check = [&](LaunchOptions o) {
    if (o.command.empty()) o.command = {"x"};
    return ResolveLaunchOptions(&env, o).message();
  };
  LaunchOptions o;
  o.nnodes = 2;
  o.node_rank = 2;
  EXPECT_THAT(check(o), HasSubstr("--node-rank 2 is not valid with --nnodes 2"));
  o = {};
  o.nproc_per_node = 0;
  EXPECT_THAT(check(o), HasSubstr("--nproc-per-node 0"));
  o = {};
  o.master_port = 0;
  EXPECT_THAT(check(o), HasSubstr("--master-port 0"));
  o = {};
  o.standalone = true;
  o.nnodes = 2;
  EXPECT_THAT(check(o), HasSubstr("--standalone runs one node"));
  o = {};
  o.no_python = o.module = true;
  EXPECT_THAT(check(o), HasSubstr("--no-python and -m/--module exclude each other"));
  LaunchOptions empty;
  EXPECT_THAT(ResolveLaunchOptions(&env, empty).message(), HasSubstr("no training script"));
}

TEST(LaunchOptions, StandalonePicksAPortAndARunId) {
  VarsEnv env({});
  LaunchOptions o;
  o.standalone = true;
  o.command = {"x"};
  ASSERT_TRUE(ResolveLaunchOptions(&env, o).ok());
  EXPECT_EQ(o.master_addr, "localhost");
  EXPECT_GT(o.master_port, 0);
  EXPECT_EQ(o.run_id.size(), 36u);
}

}  // namespace
}  // namespace air::launch
