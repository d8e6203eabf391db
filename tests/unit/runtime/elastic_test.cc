// Elastic retries (runtime/elastic.h): after lost nodes the next attempt's size is the nodes
// left while at least compute.min_nodes remain, else the run fails naming the lost nodes and the
// rule; the smaller attempt's nodes get the rendezvous environment of the new size.
#include "runtime/elastic.h"

#include <gtest/gtest.h>

#include <map>

#include "spec/node_env.h"
#include "spec/parser.h"
#include "test_util.h"

namespace air::runtime {
namespace {

spec::WorkloadSpec Parse(const std::string& min_nodes_line) {
  testing::TempDir dir;
  const std::string yaml =
      "experiment_name: elastic\n"
      "compute:\n"
      "  accelerator_type: CPU_2\n"
      "  num_accelerators: 6\n" +
      min_nodes_line + "command: echo hi\n";
  spec::LoadReport report;
  auto parsed =
      spec::ParseWorkloadSpec(yaml, dir.path() + "/train.yaml", {}, DefaultEnv(), &report);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return *parsed;
}

AttemptOutcome Lost(std::vector<LostNode> nodes) {
  AttemptOutcome outcome;
  outcome.state = store::AttemptState::kFailed;
  outcome.lost_nodes = std::move(nodes);
  return outcome;
}

TEST(ElasticTest, MinNodesDefaultsToTheNodeCount) {
  EXPECT_EQ(Parse("").compute.min_nodes, 3);
  EXPECT_EQ(Parse("  min_nodes: 1\n").compute.min_nodes, 1);
}

TEST(ElasticTest, ContinuesOnTheNodesLeftWhileMinNodesRemain) {
  spec::WorkloadSpec spec = Parse("  min_nodes: 2\n");
  ElasticStep step = NextElasticStep(spec, 0, 3, Lost({{1, "", "agent died"}}));
  EXPECT_TRUE(step.retry);
  EXPECT_EQ(step.nodes, 2);
  EXPECT_EQ(step.message,
            "attempt 0 lost 1 of its 3 nodes: node 1; continuing on the 2 nodes left "
            "(compute.min_nodes 2): NUM_NODES=2, WORLD_SIZE=4");
  // Losing another below the floor ends the run, naming the node and the rule.
  step = NextElasticStep(spec, 1, 2, Lost({{0, "n7", "NODE_FAIL"}}));
  EXPECT_FALSE(step.retry);
  EXPECT_EQ(step.message,
            "attempt 1 lost 1 of its 2 nodes: node 0 (host n7); 1 node left, fewer than "
            "compute.min_nodes 2 (an attempt continues on the nodes left only while at least "
            "min_nodes remain)");
}

TEST(ElasticTest, TheSmallerAttemptGetsTheEnvironmentOfItsSize) {
  spec::WorkloadSpec sized = SizedSpec(Parse("  min_nodes: 1\n"), 1);
  spec::LaunchContext context;
  context.master_port = 29555;
  std::map<std::string, std::string> env;
  for (const auto& var : spec::BuildNodeEnvironment(sized, context, 0)) env[var.name] = var.value;
  EXPECT_EQ(env["NUM_NODES"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["NODE_RANK"], "0");
}

}  // namespace
}  // namespace air::runtime
