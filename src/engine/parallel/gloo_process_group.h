// GlooProcessGroup: the ProcessGroup over Gloo (Debian libgloo-dev) with its TCP transport.
//
// Joining: the store at MASTER_ADDR:MASTER_PORT is hosted by rank 0 (TcpStoreServer) unless the
// launcher hosts it (TORCHELASTIC_USE_AGENT_STORE, as under torchrun; keys then live under
// torch's "/worker/attempt_<restart>/" prefix). Every rank registers, waits for all others
// (a rank that never joins: an error naming the missing ranks), publishes its host and pid, and
// connects Gloo's full mesh through the store. Gloo binds to the local address this host uses to
// reach MASTER_ADDR.
//
// Faults: every collective runs under the group's timeout. When one fails, the rank names the
// peer Gloo lost (the pair whose address Gloo's error names, else the one pair whose socket
// broke: GlooPairSockets) and records it in the store (first writer wins), so ranks that failed
// only because a survivor gave up name the same, original rank. The group is broken afterwards.
// Creating a group sets SIGPIPE to ignored (process-wide): Gloo's sends would otherwise kill the
// process when a peer dies. Thread safety: as ProcessGroup (one caller at a time).
#pragma once

#include <chrono>
#include <memory>

#include "engine/parallel/dist_env.h"
#include "engine/parallel/process_group.h"

namespace air::engine::parallel {

struct GlooOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};       // each collective
  std::chrono::milliseconds join_timeout{std::chrono::minutes(5)};  // every rank joins within
  // A sub-group (HYBRID_SHARD's node-local and cross-node groups): `dist` then holds the rank
  // within the sub-group and its size, the members join the store that the full group's
  // rendezvous uses (never hosting one) and keep their keys under this name. The full group
  // must outlive its sub-groups.
  std::string sub_group;
};

// The group of `dist`; for world size 1 a group of one that needs no store or network.
Result<std::unique_ptr<ProcessGroup>> CreateGlooProcessGroup(const DistEnv& dist,
                                                             const GlooOptions& options);

}  // namespace air::engine::parallel
