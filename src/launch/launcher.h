// air launch's node agent: torchrun's static rendezvous and its worker supervision.
//
// Node 0's air launch hosts the store at MASTER_ADDR:MASTER_PORT (engine/parallel/tcp_store.h,
// PyTorch's TCPStore protocol), which the workers join too (TORCHELASTIC_USE_AGENT_STORE=True).
// Each attempt: every node's air launch registers and waits for all --nnodes (a node that never
// joins: an error naming it), starts its --nproc-per-node workers, and watches them every
// --monitor-interval. When a worker fails, its node records the first failure in the store
// (first writer wins) and stops its workers (SIGTERM, --stop-grace, SIGKILL); the other nodes
// see the record and stop theirs. The group then restarts as a new attempt (up to
// --max-restarts) or air launch fails with a summary naming the first failure: rank, local rank,
// node, host, exit code or signal, error file and log. The attempt succeeds when every worker
// of every node exits 0. SIGTERM/SIGINT/SIGHUP to air launch stop the workers the same way.
// Thread safety: RunLaunch blocks those signals in the calling thread and waits for them there;
// call it from the main thread, once.
#pragma once

#include "base/env.h"
#include "base/status.h"
#include "launch/launch_options.h"

namespace air::launch {

// Runs the launch to its end; the result is air launch's exit code (0: every worker of the
// last attempt succeeded; 1: the group failed; 128+N: stopped by signal N). The Status is an
// error that prevented launching (port in use, a node that never joined, bad options).
Result<int> RunLaunch(LaunchOptions options, Env* env);

}  // namespace air::launch
