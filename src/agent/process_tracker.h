// Process tracking for one node: every process the node's command starts — including ones that
// double-fork, call setsid or ignore signals — is found and killed by something that outlives
// the agent and the supervisor (docs/process-tracking.md).
//
// The agent creates the node's tracker before it starts the command and records it in the
// node's tracker file (attempt_K/node_N.tracker); anyone who later finds the node's agent gone
// (the supervisor's backend, reconcile after a dead supervisor, `air cancel`) kills what is
// left with KillTrackedNode from that file alone. Three kinds, the first the machine allows:
//   cgroup2  a cgroup v2 directory per node (also a v2 mount beside v1 controllers, the hybrid
//            layout): the agent sits in it, the command in its `cmd` child; killing writes
//            cgroup.kill (or freezes, kills the frozen members, thaws, before Linux 5.14)
//   freezer  a cgroup v1 freezer directory per node, killed frozen (no member can fork or exit
//            while its pid is read and signalled)
//   session  no usable cgroup: every process of the node carries AIR_NODE_TOKEN=<random> in
//            its environment; killing scans /proc for it and signals through a pidfd after
//            checking the token (a process that clears its environment escapes: the one
//            limit of this fallback), and the agent, a child subreaper, also kills its
//            descendants
// AIR_PROCESS_TRACKER=cgroup2|freezer|session forces a kind (tests; an unavailable kind is an
// error naming what is missing). No kind ever signals a reused pid: cgroup.kill names no pid,
// frozen members cannot exit, and the session kind signals through pidfds.
// Thread safety: NodeTracker is used by the agent's main thread; KillTrackedNode is stateless.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air::agent {

enum class TrackerKind { kCgroup2, kFreezer, kSession };
const char* TrackerKindName(TrackerKind kind);

// The environment variable every process of a node carries (all kinds).
inline constexpr char kNodeTokenVar[] = "AIR_NODE_TOKEN";

// The node's tracker file: enough to find and kill every process of the node.
struct TrackerInfo {
  TrackerKind kind = TrackerKind::kSession;
  std::string cgroup;  // the node's cgroup directory (cgroup kinds; the command is in cgroup/cmd)
  std::string token;   // AIR_NODE_TOKEN's value
  // The node's own cgroup in the v1 memory controller's hierarchy (hybrid and v1 hosts, cgroup
  // kinds; "" when none): the agent and so the command sit in it, so its OOM-kill counter is
  // the node's alone (agent/oom_watch.h). Removed with the node's other cgroups.
  std::string memory_cgroup;
  int64_t agent_pid = 0;
  uint64_t agent_start_ticks = 0;
};

std::string TrackerInfoToJson(const TrackerInfo& info);
Result<TrackerInfo> TrackerInfoFromJson(const std::string& text, const std::string& path);
// kNotFound when the file does not exist (the agent never got that far: nothing was started).
Result<TrackerInfo> ReadTrackerInfo(Env* env, const std::string& path);

// How long killers wait for the last process of a node to disappear.
inline constexpr int64_t kKillWaitMicros = 5'000'000;

// Kills every process of the node (its agent included) and waits until none is left, then
// removes the node's cgroups. Returns how many processes it found alive (0: nothing was left).
Result<int> KillTrackedNode(const TrackerInfo& info, Env* env,
                            int64_t wait_micros = kKillWaitMicros);

// The agent's side: creates the node's tracking and, at the end, removes it.
class NodeTracker {
 public:
  // Picks the kind (AIR_PROCESS_TRACKER forces one) and, for the cgroup kinds, creates the
  // node's cgroup beside the agent's own, moves the agent into it and creates `cmd` for the
  // command; where the v1 memory controller is mounted, also a memory cgroup of the node's own
  // below the agent's (the agent moves into it; nothing fails when it cannot be made).
  // `name` names the cgroups ("air-r3-a0-n1"); a random suffix keeps them unique.
  static Result<std::unique_ptr<NodeTracker>> Create(const std::string& name, Env* env);
  ~NodeTracker();
  NodeTracker(const NodeTracker&) = delete;
  NodeTracker& operator=(const NodeTracker&) = delete;

  const TrackerInfo& info() const { return info_; }
  // For the command's child to join its cgroup before exec: write "0" to this descriptor
  // (async-signal-safe). -1 for the session kind.
  int command_join_fd() const { return join_fd_; }
  // Sends `sig` to every process of the command (not the agent); the count reached.
  int SignalCommand(int sig);
  // SIGKILL to every process of the command and waits (bounded) until none is left.
  Status KillCommand();
  // Kills what is left, moves the agent back to its original cgroup, removes the node's
  // cgroups. Idempotent.
  void Release();

 private:
  NodeTracker(TrackerInfo info, std::string parent_cgroup, int join_fd, Env* env)
      : info_(std::move(info)), parent_(std::move(parent_cgroup)), join_fd_(join_fd), env_(env) {}

  TrackerInfo info_;
  std::string parent_;         // the agent's original cgroup (cgroup kinds)
  std::string memory_parent_;  // the agent's original v1 memory cgroup (with info_.memory_cgroup)
  int join_fd_ = -1;
  Env* env_;
  bool released_ = false;
};

}  // namespace air::agent
