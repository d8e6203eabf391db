// Tests for the node agent: the real RunNode in a forked child process (as `air agent` runs it),
// with real bash commands: output capture, environment, exit codes and signals, stopping with a
// grace period, orphan cleanup, redaction, and the reports.
#include "agent/agent.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "agent/log_format.h"
#include "base/strings.h"
#include "test_util.h"

namespace air::agent {
namespace {

using air::testing::ProcessesWithEnv;
using air::testing::TempDir;

class AgentTest : public ::testing::Test {
 protected:
  NodeLaunch MakeLaunch(const std::string& command) {
    NodeLaunch launch;
    launch.run_id = 1;
    launch.node_rank = 0;
    launch.command = command;
    launch.workdir = dir_.path();
    launch.log_path = dir_.path() + "/node_0.log";
    launch.started_path = dir_.path() + "/node_0.started";
    launch.exit_path = dir_.path() + "/node_0.exit";
    launch.grace_seconds = 2;
    return launch;
  }

  // Runs the agent in a child process, like `air agent` does; returns the child's pid.
  pid_t StartAgent(const NodeLaunch& launch,
                   const std::vector<std::pair<std::string, std::string>>& extra_env = {}) {
    pid_t pid = ::fork();
    if (pid == 0) {
      for (const auto& [name, value] : extra_env) ::setenv(name.c_str(), value.c_str(), 1);
      auto report = RunNode(launch, DefaultEnv());
      ::_exit(report.ok() ? 0 : 3);
    }
    return pid;
  }

  NodeExitReport WaitForAgent(pid_t pid, const NodeLaunch& launch) {
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "agent status " << status;
    auto report = ReadNodeExitReport(DefaultEnv(), launch.exit_path);
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    return report.ok() ? *report : NodeExitReport{};
  }

  std::vector<LogRecord> Records(const NodeLaunch& launch) {
    std::vector<LogRecord> out;
    auto text = DefaultEnv()->ReadFile(launch.log_path);
    EXPECT_TRUE(text.ok());
    for (const auto& line : Split(*text, '\n')) {
      if (line.empty()) continue;
      auto record = ParseLogLine(line);
      EXPECT_TRUE(record.has_value()) << "not a log record: " << line;
      if (record) out.push_back(*record);
    }
    return out;
  }

  void WaitForFile(const std::string& path) {
    for (int i = 0; i < 500 && !DefaultEnv()->FileExists(path); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(DefaultEnv()->FileExists(path)) << path;
  }

  TempDir dir_;
};

TEST_F(AgentTest, CapturesBothStreamsWithEnvironmentAndWorkdir) {
  NodeLaunch launch =
      MakeLaunch("echo \"rank=$NODE_RANK dir=$(pwd)\"; echo oops >&2; printf 'no newline at end'");
  launch.env = {{"NODE_RANK", "0"}};
  NodeExitReport report = WaitForAgent(StartAgent(launch), launch);
  EXPECT_EQ(report.exit_code, 0);
  EXPECT_FALSE(report.signal.has_value());
  EXPECT_FALSE(report.stopped_by_air);
  auto records = Records(launch);
  std::vector<std::string> out, err;
  for (const auto& r : records) {
    if (r.stream == "out") out.push_back(r.text);
    if (r.stream == "err") err.push_back(r.text);
  }
  EXPECT_EQ(out, (std::vector<std::string>{"rank=0 dir=" + dir_.path(), "no newline at end"}));
  EXPECT_EQ(err, std::vector<std::string>{"oops"});
  auto started = ReadNodeStarted(DefaultEnv(), launch.started_path);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->pid, report.pid);
  EXPECT_EQ(started->pgid, report.pid);  // the command leads its own process group
}

TEST_F(AgentTest, ReportsExitCodeAndSignal) {
  NodeLaunch exits = MakeLaunch("exit 3");
  EXPECT_EQ(WaitForAgent(StartAgent(exits), exits).exit_code, 3);
  TempDir other;
  NodeLaunch killed = MakeLaunch("kill -9 $$");
  killed.log_path = other.path() + "/log";
  killed.started_path = other.path() + "/started";
  killed.exit_path = other.path() + "/exit";
  NodeExitReport report = WaitForAgent(StartAgent(killed), killed);
  EXPECT_EQ(report.signal, 9);
  EXPECT_FALSE(report.exit_code.has_value());
}

TEST_F(AgentTest, StopForwardsSigtermAndATrappingWorkerIsMarkedStopped) {
  NodeLaunch launch = MakeLaunch(
      "trap 'echo got TERM; exit 0' TERM; echo ready; "
      "sleep 30 & wait");
  pid_t agent = StartAgent(launch);
  WaitForFile(launch.started_path);
  // Give bash time to install its trap and print "ready".
  for (int i = 0; i < 200; ++i) {
    auto text = DefaultEnv()->ReadFile(launch.log_path);
    if (text.ok() && text->find("ready") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto t0 = std::chrono::steady_clock::now();
  ::kill(agent, SIGTERM);
  NodeExitReport report = WaitForAgent(agent, launch);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::milliseconds(1500));
  EXPECT_EQ(report.exit_code, 0);
  EXPECT_TRUE(report.stopped_by_air);  // exit 0 after a stop is not a success
  bool saw_term = false;
  for (const auto& r : Records(launch)) saw_term = saw_term || r.text == "got TERM";
  EXPECT_TRUE(saw_term);
}

TEST_F(AgentTest, GracePeriodEndsInSigkill) {
  NodeLaunch launch = MakeLaunch("trap '' TERM; echo ready; sleep 30; echo never");
  launch.grace_seconds = 1;
  pid_t agent = StartAgent(launch);
  WaitForFile(launch.started_path);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto t0 = std::chrono::steady_clock::now();
  ::kill(agent, SIGTERM);
  NodeExitReport report = WaitForAgent(agent, launch);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(900));
  EXPECT_LT(took, std::chrono::milliseconds(3000));
  EXPECT_EQ(report.signal, 9);
  EXPECT_TRUE(report.stopped_by_air);
  bool noted = false;
  for (const auto& r : Records(launch)) {
    noted = noted || (r.stream == "air" && r.text.find("SIGKILL") != std::string::npos);
  }
  EXPECT_TRUE(noted);
}

TEST_F(AgentTest, NoProcessOutlivesTheNode) {
  // A background job in the group, and a daemon that left the group with setsid: both must go
  // when the command's shell exits.
  std::string marker = "AIR_AGENT_TEST_MARKER=" + std::to_string(::getpid());
  NodeLaunch launch = MakeLaunch("sleep 300 & setsid sleep 301 & sleep 0.2; echo done");
  launch.env = {{"AIR_AGENT_TEST_MARKER", std::to_string(::getpid())}};
  NodeExitReport report = WaitForAgent(StartAgent(launch), launch);
  EXPECT_EQ(report.exit_code, 0);
  EXPECT_TRUE(ProcessesWithEnv(marker).empty());
}

TEST_F(AgentTest, SecretValuesAreRedactedEvenAcrossWrites) {
  NodeLaunch launch =
      MakeLaunch("echo \"token=$HF_TOKEN\"; printf 'hf_se' >&2; sleep 0.1; echo 'cret42' >&2");
  launch.secret_names = {"HF_TOKEN"};
  NodeExitReport report = WaitForAgent(StartAgent(launch, {{"HF_TOKEN", "hf_secret42"}}), launch);
  EXPECT_EQ(report.exit_code, 0);
  auto text = DefaultEnv()->ReadFile(launch.log_path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find("hf_secret42"), std::string::npos) << *text;
  EXPECT_NE(text->find("token=[REDACTED]"), std::string::npos) << *text;
  EXPECT_NE(text->find("err [REDACTED]"), std::string::npos) << *text;
}

TEST_F(AgentTest, MissingWorkdirIsAFailureNamingIt) {
  NodeLaunch launch = MakeLaunch("echo hi");
  launch.workdir = dir_.path() + "/does-not-exist";
  NodeExitReport report = WaitForAgent(StartAgent(launch), launch);
  // The command never ran: the report and the node's log name the directory and why.
  EXPECT_NE(report.error.find("enter the working directory " + launch.workdir), std::string::npos)
      << report.error;
  EXPECT_NE(report.error.find("No such file or directory"), std::string::npos) << report.error;
  auto text = DefaultEnv()->ReadFile(launch.log_path);
  EXPECT_NE(text->find("could not start the command: enter the working directory"),
            std::string::npos)
      << *text;
}

TEST_F(AgentTest, AMountTheSpecDoesNotNeedNeverFailsTheNode) {
  // A volume root the mount cannot use (it does not exist): the agent fails before any
  // namespace is made, and only a spec that names /Volumes paths makes that fatal.
  NodeLaunch launch = MakeLaunch("echo ran");
  launch.volumes_root = dir_.path() + "/no-such-root";
  launch.volumes_required = false;
  NodeExitReport report = WaitForAgent(StartAgent(launch), launch);
  EXPECT_EQ(report.exit_code, 0);
  auto text = DefaultEnv()->ReadFile(launch.log_path);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("running without /Volumes: the volume root " + launch.volumes_root +
                       " is not a directory"),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("ran"), std::string::npos);

  launch.volumes_required = true;
  launch.log_path = dir_.path() + "/required.log";
  launch.exit_path = dir_.path() + "/required.exit";
  int status = 0;
  pid_t pid = StartAgent(launch);
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << status;  // RunNode's error
  EXPECT_FALSE(DefaultEnv()->FileExists(launch.log_path));  // the command never started
}

TEST_F(AgentTest, AgentMainRejectsABadLaunchFile) {
  std::string path = dir_.path() + "/bad.json";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(path, "{not json").ok());
  EXPECT_EQ(AgentMain(path, DefaultEnv()), 2);
  EXPECT_EQ(AgentMain(dir_.path() + "/missing.json", DefaultEnv()), 2);
}

}  // namespace
}  // namespace air::agent
