// HangWatch with a hand-moved clock (an EnvWrapper over the real Env) and real node log files
// in the agent's record format: silence is counted from when every node started, output from
// any node or a changed metric marker resets it, the hang is reported once, and it names the
// running nodes, the first to go silent first, with their last lines.
#include "runtime/hang_watch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/log_format.h"
#include "base/env_wrapper.h"
#include "test_util.h"

namespace air::runtime {
namespace {

class ClockEnv : public EnvWrapper {
 public:
  ClockEnv() : EnvWrapper(DefaultEnv()) {}
  int64_t MonotonicMicros() override { return now_us; }
  int64_t now_us = 1'000'000'000;
};

constexpr int64_t kSecond = 1'000'000;

class HangWatchTest : public ::testing::Test {
 protected:
  std::string Log(int rank) { return dir_.path() + "/node_" + std::to_string(rank) + ".log"; }
  void Print(int rank, const std::string& text) {
    ASSERT_TRUE(env_.AppendToFile(Log(rank), agent::FormatLogTimestamp(env_.NowMicros()) + " out " +
                                                 text + "\n")
                    .ok());
  }
  HangWatch Make(int nodes, int64_t timeout_s) {
    HangWatchOptions options;
    options.timeout_us = timeout_s * kSecond;
    options.timeout_text = "hang_timeout_minutes: test";
    for (int rank = 0; rank < nodes; ++rank) options.node_logs.push_back(Log(rank));
    options.metric_marker = [this] { return marker_; };
    return HangWatch(&env_, std::move(options));
  }
  void Advance(int64_t seconds) { env_.now_us += seconds * kSecond; }

  testing::TempDir dir_;
  ClockEnv env_;
  std::string marker_ = "0";
};

const std::vector<NodeLife> kBothRunning = {NodeLife::kRunning, NodeLife::kRunning};

TEST_F(HangWatchTest, SilenceCountsOnlyOnceEveryNodeStarted) {
  HangWatch watch = Make(2, 10);
  EXPECT_FALSE(watch.Check({NodeLife::kRunning, NodeLife::kNotStarted}));
  Advance(60);  // queued: not silence
  EXPECT_FALSE(watch.Check({NodeLife::kRunning, NodeLife::kNotStarted}));
  EXPECT_FALSE(watch.Check(kBothRunning));  // starts the clock
  Advance(9);
  EXPECT_FALSE(watch.Check(kBothRunning));
  Advance(1);
  auto hang = watch.Check(kBothRunning);
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->silent_us, 10 * kSecond);
  EXPECT_FALSE(watch.Check(kBothRunning)) << "a hang is reported once";
}

TEST_F(HangWatchTest, OutputOfAnyNodeKeepsTheAttemptAlive) {
  HangWatch watch = Make(2, 10);
  Print(0, "start 0");
  Print(1, "start 1");
  EXPECT_FALSE(watch.Check(kBothRunning));
  for (int i = 0; i < 5; ++i) {
    Advance(8);
    Print(1, "step " + std::to_string(i));
    EXPECT_FALSE(watch.Check(kBothRunning)) << i;
  }
  Advance(10);
  auto hang = watch.Check(kBothRunning);
  ASSERT_TRUE(hang);
  // Node 0 went silent 50 s ago, node 1 10 s ago: node 0 first.
  ASSERT_EQ(hang->nodes.size(), 2u);
  EXPECT_EQ(hang->nodes[0].node_rank, 0);
  EXPECT_EQ(hang->nodes[0].silent_us, 50 * kSecond);
  EXPECT_EQ(hang->nodes[1].node_rank, 1);
  EXPECT_EQ(hang->nodes[1].silent_us, 10 * kSecond);
  EXPECT_EQ(hang->nodes[0].last_lines, "  start 0");
  EXPECT_EQ(hang->nodes[1].last_lines.substr(hang->nodes[1].last_lines.rfind('\n') + 1),
            "  step 4");
  EXPECT_EQ(hang->NodeNames(), "node 0, node 1");
  std::string text = hang->Describe("hang_timeout_minutes: test");
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "no node wrote output or logged a metric for 10.0 s (hang_timeout_minutes: test); "
            "node 0 went silent first (50.0 s), then node 1 (10.0 s)")
      << text;
  EXPECT_NE(text.find("last lines of node 0:\n  start 0"), std::string::npos) << text;
}

TEST_F(HangWatchTest, ALoggedMetricKeepsTheAttemptAlive) {
  HangWatch watch = Make(1, 10);
  EXPECT_FALSE(watch.Check({NodeLife::kRunning}));
  for (int i = 1; i <= 4; ++i) {
    Advance(8);
    marker_ = std::to_string(i);  // the workload logged a point
    EXPECT_FALSE(watch.Check({NodeLife::kRunning})) << i;
  }
  Advance(10);
  auto hang = watch.Check({NodeLife::kRunning});
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->silent_us, 10 * kSecond);
  EXPECT_EQ(hang->nodes[0].silent_us, 42 * kSecond);  // no output ever: since the start
  EXPECT_NE(hang->Describe("x").find("node 0 wrote no output"), std::string::npos);
}

// A progress bar redrawn with '\r' writes no record until its line ends; the agent's writer
// bumps the log's mtime instead (at most once a second), and that is output too.
TEST_F(HangWatchTest, AProgressBarWithoutNewlinesKeepsTheNodeAlive) {
  const int fd = ::open(Log(0).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  agent::LogLineWriter writer(fd, &env_);
  agent::LogLineWriter::Stream err{"err", nullptr, ""};
  auto make_old = [this] {
    const timespec old[2] = {{946684800, 0}, {946684800, 0}};  // 2000-01-01
    ASSERT_EQ(::utimensat(AT_FDCWD, Log(0).c_str(), old, 0), 0);
  };
  HangWatch watch = Make(1, 10);
  make_old();
  EXPECT_FALSE(watch.Check({NodeLife::kRunning}));
  for (int i = 1; i <= 4; ++i) {
    Advance(8);
    make_old();
    ASSERT_TRUE(writer.Write(err, "\r" + std::to_string(i * 10) + "%|##").ok());
    EXPECT_FALSE(watch.Check({NodeLife::kRunning})) << i;
  }
  // At most once a second: a redraw in the same second leaves the mtime as it is.
  make_old();
  ASSERT_TRUE(writer.Write(err, "\r50%|###").ok());
  EXPECT_EQ(*env_.FileModifiedMicros(Log(0)), 946684800LL * kSecond);
  EXPECT_EQ(*env_.FileSize(Log(0)), 0u) << "no record was written";
  Advance(1);
  EXPECT_FALSE(watch.Check({NodeLife::kRunning}));  // sees the mtime the test set back
  Advance(10);
  auto hang = watch.Check({NodeLife::kRunning});
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->silent_us, 10 * kSecond);
  ::close(fd);
}

TEST_F(HangWatchTest, EndedNodesAreNotNamedAndNoRunningNodeIsNoHang) {
  HangWatch watch = Make(3, 10);
  std::vector<NodeLife> lives = {NodeLife::kRunning, NodeLife::kEnded, NodeLife::kRunning};
  EXPECT_FALSE(watch.Check(lives));
  Advance(10);
  auto hang = watch.Check(lives);
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->NodeNames(), "node 0, node 2");

  HangWatch done = Make(2, 10);
  EXPECT_FALSE(done.Check(kBothRunning));
  Advance(30);
  EXPECT_FALSE(done.Check({NodeLife::kEnded, NodeLife::kEnded}));
}

TEST_F(HangWatchTest, NamesAtMostFourNodesAndCountsTheRest) {
  HangWatch watch = Make(6, 5);
  std::vector<NodeLife> lives(6, NodeLife::kRunning);
  EXPECT_FALSE(watch.Check(lives));
  for (int rank = 5; rank >= 0; --rank) {  // node 5 speaks first, node 0 last
    Advance(1);
    Print(rank, "hello");
    EXPECT_FALSE(watch.Check(lives));
  }
  Advance(5);
  auto hang = watch.Check(lives);
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->NodeNames(), "node 5, node 4, node 3, node 2");
  EXPECT_EQ(hang->more_nodes, 2u);
  EXPECT_NE(hang->Describe("x").find(", and 2 more nodes"), std::string::npos);
}

}  // namespace
}  // namespace air::runtime
