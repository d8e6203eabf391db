// The node agent (`air agent LAUNCH_FILE`): runs one node's command and reports how it ended.
//
// It sets the node's environment on top of its own, runs `bash -c COMMAND` in the node's working
// directory as the leader of a new process group, and captures stdout and stderr line by line,
// timestamped, through an OutputFilter (secret redaction) into the node's log. On SIGTERM,
// SIGINT or SIGHUP (air stopping the node, or the supervisor dying: the backend sets the agent's
// parent-death signal) it sends SIGTERM to the command's process group and to every descendant,
// and SIGKILL after the grace period. When the command's shell exits, whatever it left behind
// (background jobs, processes that changed group: the agent is a child subreaper) is killed, so
// no process of the node outlives the agent. The outcome is written atomically to the exit
// report; the start report carries the pid and process group as soon as the command runs.
//
// The agent talks to its launcher through files only (agent/node_launch.h), so it runs the same
// under the local backend and under srun.
// Thread safety: RunNode blocks the calling thread and changes the process's signal mask and
// subreaper flag; call it from the agent process's main thread only.
#pragma once

#include <string>

#include "agent/node_launch.h"
#include "base/env.h"
#include "base/status.h"

namespace air::agent {

// Runs the node to completion and writes its reports. The Status is the agent's own failure
// (unreadable launch file, log not writable); the command's failure is in the report.
Result<NodeExitReport> RunNode(const NodeLaunch& launch, Env* env);

// `air agent LAUNCH_FILE`: loads the launch file, runs the node, writes the exit report (also
// for the agent's own failures, when the report path is known). Returns the process exit
// code: 0 when the command exited 0 on its own, 1 otherwise, 2 for an unusable launch file.
int AgentMain(const std::string& launch_path, Env* env);

// AgentMain after the launch file is loaded (for launchers that adjust it first, e.g. the Slurm
// node entry, backends/slurm/node_entry.h): runs the node, reports the agent's own failure.
int RunNodeMain(const NodeLaunch& launch, Env* env);

}  // namespace air::agent
