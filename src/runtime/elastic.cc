// Elastic retries: the size of the next attempt after lost nodes (see elastic.h).
#include "runtime/elastic.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "base/strings.h"

namespace air::runtime {

ElasticStep NextElasticStep(const spec::WorkloadSpec& spec, int attempt, int nodes,
                            const AttemptOutcome& outcome) {
  std::vector<LostNode> by_rank = outcome.lost_nodes;
  std::sort(by_rank.begin(), by_rank.end(),
            [](const LostNode& a, const LostNode& b) { return a.node_rank < b.node_rank; });
  std::vector<std::string> names;
  for (const LostNode& lost : by_rank) names.push_back(lost.Name());
  const int left = nodes - static_cast<int>(outcome.lost_nodes.size());
  const int min_nodes = spec.compute.min_nodes;
  ElasticStep step;
  step.nodes = left;
  const std::string lost =
      fmt::format("attempt {} lost {} of its {} node{}: {}", attempt, names.size(), nodes,
                  nodes == 1 ? "" : "s", Join(names, ", "));
  if (left < min_nodes) {
    step.message = fmt::format(
        "{}; {} node{} left, fewer than compute.min_nodes {} (an attempt continues on the nodes "
        "left only while at least min_nodes remain)",
        lost, left, left == 1 ? "" : "s", min_nodes);
    return step;
  }
  step.retry = true;
  step.message = fmt::format(
      "{}; continuing on the {} node{} left (compute.min_nodes {}): NUM_NODES={}, WORLD_SIZE={}",
      lost, left, left == 1 ? "" : "s", min_nodes, left, left * spec.compute.per_node);
  return step;
}

spec::WorkloadSpec SizedSpec(const spec::WorkloadSpec& spec, int nodes) {
  spec::WorkloadSpec sized = spec;
  sized.compute.num_nodes = nodes;
  sized.compute.num_accelerators = nodes * spec.compute.per_node;
  return sized;
}

}  // namespace air::runtime
