// Tests for what the runtime derives from a spec: the stored spec JSON round trip, each node's
// launch (environment from BuildNodeEnvironment, secrets kept out of the launch file, the venv
// first on PATH), capability checks at submit, and dead-supervisor reconciliation.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "agent/node_launch.h"
#include "parse_spec.h"
#include "runtime/node_plan.h"
#include "runtime/reconcile.h"
#include "runtime/spec_codec.h"
#include "runtime/submit_detail.h"
#include "spec/parser.h"
#include "test_util.h"

namespace air::runtime {
namespace {

using air::testing::ParseSpec;
using air::testing::TempDir;

constexpr const char* kSpec = R"(experiment_name: plan-test
compute:
  accelerator_type: CPU_2
  num_accelerators: 4
command: |
  echo hello
env_variables:
  FOO: bar
secrets:
  HF_TOKEN: my_scope/hf_token
max_retries: 2
timeout_minutes: 5
parameters:
  lr: 0.001
  layers: [1, 2]
idempotency_token: tok-1
)";

TEST(SpecCodecTest, RoundTripKeepsEveryField) {
  TempDir dir;
  spec::WorkloadSpec spec = ParseSpec(kSpec, dir.path());
  auto back = SpecFromJsonText(SpecToJson(spec).dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(SpecToJson(*back), SpecToJson(spec));
  EXPECT_EQ(back->compute.num_nodes, 2);
  EXPECT_EQ(back->secrets.at(0).second.ToString(), "my_scope/hf_token");
  EXPECT_EQ(back->parameters_yaml, spec.parameters_yaml);
  EXPECT_FALSE(SpecFromJsonText("{\"format\": 1}").ok());
  EXPECT_FALSE(SpecFromJsonText("not json").ok());
}

TEST(NodePlanTest, EachNodeGetsItsEnvironmentAndSecretsStayOutOfTheLaunchFile) {
  TempDir dir;
  spec::WorkloadSpec spec = ParseSpec(kSpec, dir.path());
  store::RunRecord run;
  run.id = 7;
  run.mlflow_run_id = "abc";
  Layout layout(dir.path());
  PreparedRun prepared;
  prepared.node_workdirs = {"/w/node_0", "/w/node_1"};
  prepared.hyperparameters_path = "/w/parameters.yaml";
  prepared.python_bin_dir = "/envs/k/bin";
  prepared.secret_values = {{"HF_TOKEN", "hf_value_123"}};
  AttemptSettings settings;
  settings.attempt = 1;
  settings.master_port = 41000;
  settings.inherited_path = "/usr/bin";
  backends::AttemptToLaunch plan = PlanAttempt(spec, run, layout, prepared, settings);
  ASSERT_EQ(plan.nodes.size(), 2u);
  EXPECT_EQ(plan.gpus_per_node, 0);
  for (int rank = 0; rank < 2; ++rank) {
    const auto& node = plan.nodes[rank];
    std::map<std::string, std::string> env(node.launch.env.begin(), node.launch.env.end());
    EXPECT_EQ(env["NODE_RANK"], std::to_string(rank));
    EXPECT_EQ(env["NUM_NODES"], "2");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["MASTER_PORT"], "41000");
    EXPECT_EQ(env["CODE_SOURCE_PATH"], prepared.node_workdirs[rank]);
    EXPECT_EQ(env["HYPERPARAMETERS_PATH"], "/w/parameters.yaml");
    EXPECT_EQ(env["MLFLOW_RUN_ID"], "abc");
    EXPECT_EQ(env["MLFLOW_EXPERIMENT_NAME"], "plan-test");
    EXPECT_EQ(env["AIR_RUN_ID"], "7");
    EXPECT_EQ(env["AIR_ATTEMPT"], "1");
    EXPECT_EQ(env["PYTHONUNBUFFERED"], "1");
    EXPECT_EQ(env["FOO"], "bar");
    EXPECT_EQ(env["PATH"], "/envs/k/bin:/usr/bin");
    EXPECT_EQ(env["VIRTUAL_ENV"], "/envs/k");
    EXPECT_EQ(env.count("HF_TOKEN"), 0u);
    EXPECT_EQ(node.launch.secret_names, std::vector<std::string>{"HF_TOKEN"});
    ASSERT_EQ(node.secret_env.size(), 1u);
    EXPECT_EQ(node.secret_env[0].second, "hf_value_123");
    EXPECT_EQ(agent::NodeLaunchToJson(node.launch).find("hf_value_123"), std::string::npos);
    EXPECT_EQ(node.launch.workdir, prepared.node_workdirs[rank]);
    EXPECT_EQ(node.launch.log_path, layout.NodeLog(7, 1, rank));
  }
}

TEST(SubmitTest, CapabilitiesRefuseWhatTheBackendCannotRun) {
  TempDir dir;
  std::string gpu_yaml = std::string(kSpec);
  gpu_yaml.replace(gpu_yaml.find("CPU_2"), 5, "GPU_8xH100");
  gpu_yaml.replace(gpu_yaml.find("num_accelerators: 4"), 19, "num_accelerators: 16");
  spec::WorkloadSpec gpu = ParseSpec(gpu_yaml, dir.path());
  backends::ClusterCapabilities caps;
  caps.name = "local";
  caps.gpus_available = 1;
  Status refused = CheckCapabilities(gpu, caps);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("train.yaml:3:"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("16 GPU"), std::string::npos);
  EXPECT_NE(refused.message().find("CPU_<n>"), std::string::npos);
  caps.gpus_available = 16;
  EXPECT_TRUE(CheckCapabilities(gpu, caps).ok());
  EXPECT_TRUE(
      CheckCapabilities(ParseSpec(kSpec, dir.path()), backends::ClusterCapabilities{}).ok());
  EXPECT_EQ(NewMlflowRunId().size(), 32u);
  EXPECT_NE(NewMlflowRunId(), NewMlflowRunId());
}

TEST(ReconcileTest, ARunWhoseSupervisorDiedBecomesInternalError) {
  TempDir dir;
  Layout layout(dir.path());
  auto store = store::Store::Open(layout.DbPath(), DefaultEnv());
  ASSERT_TRUE(store.ok());
  store::NewRun run;
  run.experiment = "e";
  run.spec_json = "{}";
  run.mlflow_run_id = "m";
  int64_t id = (*store)->CreateRun(run)->run.id;
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // a pid that no longer exists
  ASSERT_TRUE((*store)->SetSupervisor(id, child, 1).ok());
  ASSERT_TRUE((*store)->TransitionRun(id, store::RunState::kRunning, "go").ok());
  // It died during attempt 0: node 0's agent stopped its command and reported; node 1's did not.
  ASSERT_TRUE((*store)->StartAttempt(id, 0, 29500, 2).ok());
  ASSERT_TRUE((*store)->RecordNodeStarted(id, 0, 0, 100, 101, 101, 1).ok());
  ASSERT_TRUE(DefaultEnv()->CreateDirs(layout.AttemptDir(id, 0)).ok());
  agent::NodeExitReport stopped;
  stopped.signal = 15;
  stopped.stopped_by_air = true;
  stopped.ended_us = 5;
  ASSERT_TRUE(
      DefaultEnv()
          ->WriteFileAtomic(layout.NodeExitFile(id, 0, 0), agent::NodeExitReportToJson(stopped))
          .ok());
  auto reconciled = ReconcileRun(store->get(), layout, *(*store)->GetRun(id), DefaultEnv());
  ASSERT_TRUE(reconciled.ok());
  EXPECT_EQ(reconciled->state, store::RunState::kInternalError);
  EXPECT_NE(reconciled->failure_summary.find(std::to_string(child)), std::string::npos);
  // Nothing stays RUNNING under the ended run.
  auto attempts = (*store)->ListAttempts(id);
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 1u);
  EXPECT_EQ((*attempts)[0].state, store::AttemptState::kInternalError);
  EXPECT_TRUE((*attempts)[0].ended_us.has_value());
  auto nodes = (*store)->ListNodes(id, 0);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].state, store::NodeState::kStopped);
  EXPECT_EQ((*nodes)[0].signal, 15);
  EXPECT_EQ((*nodes)[1].state, store::NodeState::kLost);

  // A live supervisor (this process) keeps the run as it is.
  int64_t live = (*store)->CreateRun(run)->run.id;
  ASSERT_TRUE((*store)->SetSupervisor(live, ::getpid(), 0).ok());
  ASSERT_TRUE((*store)->TransitionRun(live, store::RunState::kRunning, "go").ok());
  auto kept = ReconcileRun(store->get(), layout, *(*store)->GetRun(live), DefaultEnv());
  EXPECT_EQ(kept->state, store::RunState::kRunning);
}

}  // namespace
}  // namespace air::runtime
