// The run state machine (docs/state-machine.md): the states a run, an attempt and a node go
// through, their stable names (as stored and printed), and the legal run transitions. The store
// refuses any transition this table does not allow, atomically, so two processes racing to end a
// run (a supervisor finishing, a CLI cancelling) cannot both win.
//
//   PENDING ──> RUNNING ──> SUCCEEDED | FAILED | TIMED_OUT | CANCELED
//      │           │  └───> TERMINATING ──> CANCELED | TIMED_OUT | FAILED
//      └──> CANCELED | FAILED          (any non-terminal state ──> INTERNAL_ERROR)
//
// Thread safety: pure functions over values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace air::store {

enum class RunState {
  kPending,        // created; the supervisor has not started work yet
  kRunning,        // the supervisor prepares the environment or an attempt is live
  kTerminating,    // a cancel or timeout is stopping the nodes
  kSucceeded,      // the last attempt's nodes all exited 0 on their own
  kFailed,         // a node failed and no retries were left, or preparation failed
  kTimedOut,       // an attempt ran past timeout_minutes
  kCanceled,       // `air cancel`
  kInternalError,  // air itself failed (e.g. its supervisor died)
};

// The outcome of one attempt (a full launch of every node).
enum class AttemptState { kRunning, kSucceeded, kFailed, kTimedOut, kCanceled, kInternalError };

// One node of one attempt.
enum class NodeState {
  kStarting,  // the agent was launched; the command has not been reported started
  kRunning,   // the command runs (pid/pgid known)
  kExited,    // the command ended on its own (exit code or signal)
  kStopped,   // air stopped it (failure elsewhere, timeout, cancel); its exit does not count
  kLost,      // the agent vanished without a report
};

const char* RunStateName(RunState state);          // "PENDING", "TIMED_OUT", ...
const char* AttemptStateName(AttemptState state);  // "RUNNING", "SUCCEEDED", ...
const char* NodeStateName(NodeState state);        // "STARTING", "RUNNING", ...

std::optional<RunState> ParseRunState(std::string_view name);
std::optional<AttemptState> ParseAttemptState(std::string_view name);
std::optional<NodeState> ParseNodeState(std::string_view name);

// Every run state, in declaration order (for help texts and filters).
std::vector<RunState> AllRunStates();

bool IsTerminal(RunState state);
bool IsLegalTransition(RunState from, RunState to);

// The run state that ends a run whose last attempt ended in `attempt`.
RunState RunStateForAttempt(AttemptState attempt);

}  // namespace air::store
