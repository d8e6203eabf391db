// Elastic retries (compute.min_nodes; docs/state-machine.md, "Elastic retries"): when an attempt
// fails because nodes were lost (their agent or host died; Slurm's NODE_FAIL), the next attempt
// runs on the nodes that are left, with the rendezvous environment of the new size (NUM_NODES,
// WORLD_SIZE, ...), as long as at least min_nodes are left; otherwise the run fails naming the
// lost nodes and the rule. A worker's own failure still retries at the attempt's full size.
// A run whose min_nodes equals its node count (the default) never shrinks.
// Thread safety: pure functions.
#pragma once

#include <string>

#include "runtime/attempt_runner.h"
#include "spec/workload_spec.h"

namespace air::runtime {

struct ElasticStep {
  bool retry = false;   // continue on `nodes` nodes
  int nodes = 0;        // the size of the next attempt
  std::string message;  // what happened and why: for the retry event or the run's failure
};

// What follows attempt `attempt` of `nodes` nodes, which failed with `outcome.lost_nodes`
// non-empty, for a spec with min_nodes < num_nodes.
ElasticStep NextElasticStep(const spec::WorkloadSpec& spec, int attempt, int nodes,
                            const AttemptOutcome& outcome);

// `spec` with `nodes` nodes of the same shape (num_nodes and num_accelerators changed).
spec::WorkloadSpec SizedSpec(const spec::WorkloadSpec& spec, int nodes);

}  // namespace air::runtime
