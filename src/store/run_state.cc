// Names and legal transitions of run, attempt and node states.
#include "store/run_state.h"

#include <array>
#include <utility>

namespace air::store {
namespace {

constexpr std::array<std::pair<RunState, const char*>, 8> kRunNames = {{
    {RunState::kPending, "PENDING"},
    {RunState::kRunning, "RUNNING"},
    {RunState::kTerminating, "TERMINATING"},
    {RunState::kSucceeded, "SUCCEEDED"},
    {RunState::kFailed, "FAILED"},
    {RunState::kTimedOut, "TIMED_OUT"},
    {RunState::kCanceled, "CANCELED"},
    {RunState::kInternalError, "INTERNAL_ERROR"},
}};

constexpr std::array<std::pair<AttemptState, const char*>, 6> kAttemptNames = {{
    {AttemptState::kRunning, "RUNNING"},
    {AttemptState::kSucceeded, "SUCCEEDED"},
    {AttemptState::kFailed, "FAILED"},
    {AttemptState::kTimedOut, "TIMED_OUT"},
    {AttemptState::kCanceled, "CANCELED"},
    {AttemptState::kInternalError, "INTERNAL_ERROR"},
}};

constexpr std::array<std::pair<NodeState, const char*>, 5> kNodeNames = {{
    {NodeState::kStarting, "STARTING"},
    {NodeState::kRunning, "RUNNING"},
    {NodeState::kExited, "EXITED"},
    {NodeState::kStopped, "STOPPED"},
    {NodeState::kLost, "LOST"},
}};

template <typename Enum, size_t N>
const char* NameOf(const std::array<std::pair<Enum, const char*>, N>& table, Enum value) {
  for (const auto& [e, name] : table) {
    if (e == value) return name;
  }
  return "UNKNOWN";
}

template <typename Enum, size_t N>
std::optional<Enum> Parse(const std::array<std::pair<Enum, const char*>, N>& table,
                          std::string_view name) {
  for (const auto& [e, n] : table) {
    if (name == n) return e;
  }
  return std::nullopt;
}

}  // namespace

const char* RunStateName(RunState state) { return NameOf(kRunNames, state); }
const char* AttemptStateName(AttemptState state) { return NameOf(kAttemptNames, state); }
const char* NodeStateName(NodeState state) { return NameOf(kNodeNames, state); }

std::optional<RunState> ParseRunState(std::string_view name) { return Parse(kRunNames, name); }
std::optional<AttemptState> ParseAttemptState(std::string_view name) {
  return Parse(kAttemptNames, name);
}
std::optional<NodeState> ParseNodeState(std::string_view name) { return Parse(kNodeNames, name); }

std::vector<RunState> AllRunStates() {
  std::vector<RunState> states;
  for (const auto& [state, name] : kRunNames) states.push_back(state);
  return states;
}

bool IsTerminal(RunState state) {
  switch (state) {
    case RunState::kPending:
    case RunState::kRunning:
    case RunState::kTerminating:
      return false;
    default:
      return true;
  }
}

bool IsLegalTransition(RunState from, RunState to) {
  if (IsTerminal(from) || from == to) return false;
  if (to == RunState::kInternalError) return true;  // air can fail in any live state
  switch (from) {
    case RunState::kPending:
      // Preparation failures (a secret, the environment) and cancels end a run before any
      // node starts.
      return to == RunState::kRunning || to == RunState::kFailed || to == RunState::kCanceled;
    case RunState::kRunning:
      return to == RunState::kTerminating || to == RunState::kSucceeded ||
             to == RunState::kFailed || to == RunState::kTimedOut || to == RunState::kCanceled;
    case RunState::kTerminating:
      // Stopping never ends in success: a worker that exits 0 after air stopped it did not
      // finish its work.
      return to == RunState::kCanceled || to == RunState::kTimedOut || to == RunState::kFailed;
    default:
      return false;
  }
}

RunState RunStateForAttempt(AttemptState attempt) {
  switch (attempt) {
    case AttemptState::kSucceeded:
      return RunState::kSucceeded;
    case AttemptState::kFailed:
      return RunState::kFailed;
    case AttemptState::kTimedOut:
      return RunState::kTimedOut;
    case AttemptState::kCanceled:
      return RunState::kCanceled;
    case AttemptState::kRunning:
    case AttemptState::kInternalError:
      return RunState::kInternalError;
  }
  return RunState::kInternalError;
}

}  // namespace air::store
