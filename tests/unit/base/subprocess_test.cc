// Tests for RunSubprocess: captured output and exit status, exec failures told apart from exit
// code 127, a helper (pip, git) that dies with its caller instead of running on unowned, and the
// CPUs a child is bound to.
#include "base/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "base/process_limits.h"
#include "unit/runtime/test_util.h"

namespace air {
namespace {

using air::testing::TempDir;

TEST(RunSubprocess, CapturesOutputAndExitCode) {
  SubprocessOptions options;
  options.argv = {"sh", "-c", "echo out; echo err >&2; exit 7"};
  auto ran = RunSubprocess(options);
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  EXPECT_EQ(ran->exit_code, 7);
  EXPECT_EQ(ran->output, "out\nerr\n");
  EXPECT_EQ(ran->Describe(), "exit code 7");
}

TEST(RunSubprocess, MissingProgramIsAStartError) {
  SubprocessOptions options;
  options.argv = {"air-no-such-program"};
  auto ran = RunSubprocess(options);
  ASSERT_FALSE(ran.ok());
  EXPECT_NE(ran.status().message().find("run air-no-such-program"), std::string::npos)
      << ran.status().ToString();
}

TEST(RunSubprocess, ChildRunsOnTheCpusItIsGiven) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  SubprocessOptions options;
  options.argv = {"sh", "-c", "grep Cpus_allowed_list /proc/self/status"};
  options.cpus = {allowed.back()};
  auto ran = RunSubprocess(options);
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  EXPECT_EQ(ran->output, "Cpus_allowed_list:\t" + std::to_string(allowed.back()) + "\n");
  options.cpus.clear();  // none given: the caller's
  ran = RunSubprocess(options);
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line) && !line.starts_with("Cpus_allowed_list:")) {
  }
  EXPECT_EQ(ran->output, line + "\n");
}

TEST(RunSubprocess, CpusOutsideTheAllowedSetAreAStartError) {
  SubprocessOptions options;
  options.argv = {"true"};
  options.cpus = {CPU_SETSIZE - 1};  // no machine this runs on has it
  auto ran = RunSubprocess(options);
  ASSERT_FALSE(ran.ok());
  EXPECT_NE(ran.status().message().find("bind true to CPUs " + std::to_string(CPU_SETSIZE - 1)),
            std::string::npos)
      << ran.status().ToString();
  options.cpus = {-1};
  ran = RunSubprocess(options);
  ASSERT_FALSE(ran.ok());
  EXPECT_NE(ran.status().message().find("CPU -1 is not in [0, "), std::string::npos)
      << ran.status().ToString();
}

bool ProcessGone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z';
}

TEST(RunSubprocess, HelperDiesWithItsCaller) {
  TempDir dir;
  const std::string pid_file = dir.path() + "/helper.pid";
  pid_t caller = ::fork();
  ASSERT_GE(caller, 0);
  if (caller == 0) {  // stands in for a run's supervisor running pip
    SubprocessOptions options;
    options.argv = {"sh", "-c",
                    "echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file +
                        " && exec sleep 30"};
    options.output_path = dir.path() + "/helper.log";
    (void)RunSubprocess(options);
    ::_exit(0);
  }
  pid_t helper = 0;
  for (int i = 0; i < 100 && helper == 0; ++i) {
    std::ifstream in(pid_file);
    if (!(in >> helper)) helper = 0;
    if (helper == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(helper, 0) << "the helper never started";
  ASSERT_EQ(::kill(caller, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(caller, &status, 0), caller);
  bool gone = false;
  for (int i = 0; i < 40 && !gone; ++i) {
    gone = ProcessGone(helper);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!gone) ::kill(helper, SIGKILL);
  EXPECT_TRUE(gone) << "helper " << helper << " outlived its caller";
}

}  // namespace
}  // namespace air

namespace air {
namespace {

// A helper whose output is captured through a pipe can be cancelled like one whose output goes
// to a file (before: the pipe was read to EOF first, so should_stop was never asked).
TEST(RunSubprocess, CapturedHelperCanBeCancelled) {
  SubprocessOptions options;
  options.argv = {"sh", "-c", "echo started; sleep 60"};
  const auto start = std::chrono::steady_clock::now();
  options.should_stop = [&] {
    return std::chrono::steady_clock::now() - start > std::chrono::milliseconds(300);
  };
  auto ran = RunSubprocess(options);
  ASSERT_FALSE(ran.ok());
  EXPECT_EQ(ran.status().code(), ErrorCode::kCancelled) << ran.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// A helper that exits but leaves a process outside its group holding the pipe: the call
// returns with the output so far instead of waiting for that process.
TEST(RunSubprocess, CapturedHelperReturnsWhenItExitsEvenIfThePipeStaysOpen) {
  TempDir dir;
  const std::string pid_file = dir.path() + "/holder.pid";
  SubprocessOptions options;
  options.argv = {"sh", "-c", "echo done; setsid sh -c 'echo $$ > " + pid_file + "; sleep 60' &"};
  const auto start = std::chrono::steady_clock::now();
  auto ran = RunSubprocess(options);
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  EXPECT_EQ(ran->exit_code, 0);
  EXPECT_EQ(ran->output, "done\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  std::ifstream in(pid_file);
  pid_t holder = 0;
  if (in >> holder && holder > 0) ::kill(holder, SIGKILL);
}

}  // namespace
}  // namespace air
