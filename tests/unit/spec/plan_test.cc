// The dry-run plan: the seed's plan in text and JSON, and a CPU example with its snapshot.
#include "spec/plan.h"

#include <gtest/gtest.h>

#include "spec/parser.h"
#include "spec_test_util.h"

namespace air::spec {
namespace {

TEST(Plan, SeedPlanShowsShapeEnvironmentAndSnapshot) {
  std::string path = (testing::SourceDir() / "examples/multinode_llm_sft/train.yaml").string();
  LoadReport report;
  Result<WorkloadSpec> spec = LoadWorkloadSpec(path, {"max_retries=0"}, DefaultEnv(), &report);
  ASSERT_TRUE(spec.ok());
  Result<SnapshotListing> snapshot = ScanSnapshot(spec->code_source->snapshot, DefaultEnv());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  PlanInput input{&*spec, &*snapshot, &report.changes};
  std::string text = PlanToText(input);
  for (const char* expected : {
           "  experiment   air-multinode-llama-sft\n",
           "  compute      2 nodes \u00d7 8 GPUs (GPU_8xH100); 16 GPUs in all\n",
           "  retries      0 (at most 1 attempt; a retry restarts every node)\n",
           "  timeout      120 minutes per attempt\n",
           "environment of node 0 (of 2):\n  NUM_NODES=2\n  NODE_RANK=0\n  LOCAL_WORLD_SIZE=8\n"
           "  WORLD_SIZE=16\n  MASTER_ADDR=<assigned at launch>\n",
           "  HF_TOKEN=[REDACTED]  (secret my_scope/hf_token, resolved at launch)\n",
           "environment of node 1: the same except NODE_RANK=1\n",
           "  learning_rate: 0.00002\n",
           "\ndry run: nothing was started\n",
       }) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing: " << expected << "\n" << text;
  }
  EXPECT_NE(text.find(std::to_string(snapshot->files.size()) + " files"), std::string::npos);

  nlohmann::ordered_json json = PlanToJson(input);
  EXPECT_EQ(json["compute"]["num_nodes"], 2);
  EXPECT_EQ(json["compute"]["description"], "2 nodes \u00d7 8 GPUs (GPU_8xH100)");
  ASSERT_EQ(json["nodes"].size(), 2u);
  EXPECT_EQ(json["nodes"][1]["env"][1]["name"], "NODE_RANK");
  EXPECT_EQ(json["nodes"][1]["env"][1]["value"], "1");
  EXPECT_EQ(json["nodes"][0]["env"].back()["name"], "HF_TOKEN");
  EXPECT_EQ(json["nodes"][0]["env"].back()["value"], "[REDACTED]");
  EXPECT_EQ(json["nodes"][0]["env"].back()["secret"], true);
  EXPECT_EQ(json["code_source"]["files"], snapshot->files.size());
  EXPECT_EQ(json["overrides"][0]["field"], "max_retries");
  EXPECT_EQ(json["max_attempts"], 1);
}

TEST(Plan, ManyNodesCollapseToOneLine) {
  testing::TempDir dir;
  std::string path = dir.Write("w.yaml",
                               "experiment_name: wide\n"
                               "compute: {accelerator_type: GPU_8xH200, num_accelerators: 64}\n"
                               "command: echo hi\n");
  LoadReport report;
  Result<WorkloadSpec> spec = LoadWorkloadSpec(path, {}, DefaultEnv(), &report);
  ASSERT_TRUE(spec.ok());
  PlanInput input{&*spec, nullptr, &report.changes};
  std::string text = PlanToText(input);
  EXPECT_NE(text.find("8 nodes \u00d7 8 GPUs (GPU_8xH200)"), std::string::npos) << text;
  EXPECT_NE(text.find("environment of nodes 1 to 7: the same except NODE_RANK=1 to 7\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("code source  none\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sampling     system metrics every 10 s per node\n"), std::string::npos)
      << text;  // the default
  EXPECT_EQ(PlanToJson(input)["nodes"].size(), 8u);
  EXPECT_EQ(PlanToJson(input)["system_metrics_interval_s"], 10);
}

TEST(Plan, OneAcceleratorIsSingular) {
  testing::TempDir dir;
  for (const auto& [type, want] : std::vector<std::pair<std::string, std::string>>{
           {"CPU_1", "1 node \u00d7 1 worker process (CPU_1); 1 worker process in all\n"},
           {"GPU_1xA10", "1 node \u00d7 1 GPU (GPU_1xA10); 1 GPU in all\n"}}) {
    std::string path =
        dir.Write("w.yaml", "experiment_name: one\ncompute: {accelerator_type: " + type +
                                ", num_accelerators: 1}\ncommand: |+\n"
                                "  echo hi\n\n\n");
    LoadReport report;
    Result<WorkloadSpec> spec = LoadWorkloadSpec(path, {}, DefaultEnv(), &report);
    ASSERT_TRUE(spec.ok());
    std::string text = PlanToText(PlanInput{&*spec, nullptr, &report.changes});
    EXPECT_NE(text.find("  compute      " + want), std::string::npos) << text;
    EXPECT_NE(text.find("command (bash -c on every node, 1 line):\n"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace air::spec
