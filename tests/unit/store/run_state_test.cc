// Tests for the run state machine: names round-trip, terminal states, and the full transition
// table (every pair checked against the documented diagram).
#include "store/run_state.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

namespace air::store {
namespace {

TEST(RunStateTest, NamesRoundTrip) {
  for (RunState s : AllRunStates()) {
    auto parsed = ParseRunState(RunStateName(s));
    ASSERT_TRUE(parsed.has_value()) << RunStateName(s);
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_FALSE(ParseRunState("SUCCESS").has_value());
  EXPECT_STREQ(RunStateName(RunState::kTimedOut), "TIMED_OUT");
  EXPECT_EQ(ParseAttemptState("FAILED"), AttemptState::kFailed);
  EXPECT_EQ(ParseNodeState("STOPPED"), NodeState::kStopped);
}

TEST(RunStateTest, TerminalStates) {
  std::set<RunState> terminal;
  for (RunState s : AllRunStates()) {
    if (IsTerminal(s)) terminal.insert(s);
  }
  EXPECT_EQ(terminal,
            (std::set<RunState>{RunState::kSucceeded, RunState::kFailed, RunState::kTimedOut,
                                RunState::kCanceled, RunState::kInternalError}));
}

TEST(RunStateTest, TransitionTableMatchesTheDiagram) {
  using S = RunState;
  const std::set<std::pair<S, S>> legal = {
      {S::kPending, S::kRunning},      {S::kPending, S::kFailed},
      {S::kPending, S::kCanceled},     {S::kPending, S::kInternalError},
      {S::kRunning, S::kTerminating},  {S::kRunning, S::kSucceeded},
      {S::kRunning, S::kFailed},       {S::kRunning, S::kTimedOut},
      {S::kRunning, S::kCanceled},     {S::kRunning, S::kInternalError},
      {S::kTerminating, S::kCanceled}, {S::kTerminating, S::kTimedOut},
      {S::kTerminating, S::kFailed},   {S::kTerminating, S::kInternalError},
  };
  for (S from : AllRunStates()) {
    for (S to : AllRunStates()) {
      EXPECT_EQ(IsLegalTransition(from, to), legal.count({from, to}) == 1)
          << RunStateName(from) << " -> " << RunStateName(to);
    }
  }
}

TEST(RunStateTest, StoppingNeverEndsInSuccess) {
  EXPECT_FALSE(IsLegalTransition(RunState::kTerminating, RunState::kSucceeded));
}

TEST(RunStateTest, AttemptOutcomeMapsToRunState) {
  EXPECT_EQ(RunStateForAttempt(AttemptState::kSucceeded), RunState::kSucceeded);
  EXPECT_EQ(RunStateForAttempt(AttemptState::kTimedOut), RunState::kTimedOut);
  EXPECT_EQ(RunStateForAttempt(AttemptState::kCanceled), RunState::kCanceled);
  EXPECT_EQ(RunStateForAttempt(AttemptState::kFailed), RunState::kFailed);
  EXPECT_EQ(RunStateForAttempt(AttemptState::kRunning), RunState::kInternalError);
}

}  // namespace
}  // namespace air::store
