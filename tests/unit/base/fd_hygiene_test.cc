// Tests for descriptor hygiene: a child marks every inherited descriptor close-on-exec, with
// close_range and with the fallback used where the kernel lacks it (forced by
// AIR_TEST_NO_CLOSE_RANGE=1 through the Env), so no inherited pipe keeps a caller waiting.
#include "base/fd_hygiene.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/env_wrapper.h"

namespace air {
namespace {

class NoCloseRangeEnv : public EnvWrapper {
 public:
  NoCloseRangeEnv() : EnvWrapper(DefaultEnv()) {}
  std::optional<std::string> GetEnv(const std::string& name) override {
    if (name == "AIR_TEST_NO_CLOSE_RANGE") return std::string("1");
    return target()->GetEnv(name);
  }
};

// Forks a child holding the write end of a pipe (not close-on-exec) that execs `sleep 30`; the
// read end sees EOF at once only if the exec closed the inherited descriptor.
bool InheritedPipeClosedAtExec(const FdHygiene& hygiene) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);                 // no O_CLOEXEC: inherited like a caller's pipe
  int high = ::fcntl(fds[1], F_DUPFD, 200);  // a high number, as a harness would leave it
  EXPECT_GE(high, 200);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (MarkInheritedFdsCloexec(hygiene) != 0) ::_exit(3);
    ::execl("/bin/sleep", "sleep", "30", nullptr);
    ::_exit(4);
  }
  ::close(fds[1]);
  ::close(high);
  // EOF within 10 s (the sleeper holds nothing) or not at all.
  int flags = ::fcntl(fds[0], F_GETFL);
  ::fcntl(fds[0], F_SETFL, flags | O_NONBLOCK);
  bool eof = false;
  for (int i = 0; i < 1000 && !eof; ++i) {
    char c;
    ssize_t n = ::read(fds[0], &c, 1);
    if (n == 0) eof = true;
    if (!eof) ::usleep(10'000);
  }
  ::close(fds[0]);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return eof;
}

TEST(FdHygiene, CloseRangeMarksInheritedDescriptors) {
  FdHygiene hygiene = FdHygieneFor(DefaultEnv());
  EXPECT_TRUE(hygiene.use_close_range);
  EXPECT_TRUE(InheritedPipeClosedAtExec(hygiene));
}

TEST(FdHygiene, FallbackWithoutCloseRangeMarksInheritedDescriptors) {
  NoCloseRangeEnv env;
  FdHygiene hygiene = FdHygieneFor(&env);
  EXPECT_FALSE(hygiene.use_close_range);
  EXPECT_TRUE(InheritedPipeClosedAtExec(hygiene));
}

}  // namespace
}  // namespace air
