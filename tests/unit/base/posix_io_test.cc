// Tests for the POSIX helpers (posix_io.h): MergedEnvironment's overrides replace a variable in
// place, every copy of it when the inherited environment holds the name more than once (else
// getenv, which takes the first, would still see the old value), and are added when new;
// OpenOwnFileForWrite never writes through a planted symlink or into another user's file.
#include "base/posix_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/env.h"

extern char** environ;

namespace air {
namespace {

// Swaps in a fixed environment for the test's duration.
class FixedEnvironment {
 public:
  explicit FixedEnvironment(std::vector<std::string> entries) : entries_(std::move(entries)) {
    for (auto& e : entries_) pointers_.push_back(e.data());
    pointers_.push_back(nullptr);
    saved_ = environ;
    environ = pointers_.data();
  }
  ~FixedEnvironment() { environ = saved_; }

 private:
  std::vector<std::string> entries_;
  std::vector<char*> pointers_;
  char** saved_;
};

TEST(MergedEnvironment, ReplacesInPlaceAndAppendsNewNames) {
  FixedEnvironment env({"A=1", "B=2", "C=3"});
  EXPECT_EQ(MergedEnvironment({{"B", "x"}, {"D", "y"}}),
            (std::vector<std::string>{"A=1", "B=x", "C=3", "D=y"}));
}

TEST(MergedEnvironment, AnOverrideReplacesEveryInheritedCopyOfItsName) {
  FixedEnvironment env({"SECRET=old", "A=1", "SECRET=older", "A=2"});
  // Names not overridden keep their duplicates as inherited.
  EXPECT_EQ(MergedEnvironment({{"SECRET", "new"}}),
            (std::vector<std::string>{"SECRET=new", "A=1", "A=2"}));
}

TEST(MergedEnvironment, TheLastOverrideOfANameWins) {
  FixedEnvironment env({"A=1"});
  EXPECT_EQ(MergedEnvironment({{"B", "x"}, {"A", "2"}, {"B", "y"}}),
            (std::vector<std::string>{"A=2", "B=y"}));
}

TEST(ReadSmallFile, ReadsProcFilesWholeAndBoundsTheRest) {
  // /proc files report size 0: the read goes to their end.
  const std::optional<std::string> status = ReadSmallFile("/proc/self/status");
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(status->find("Pid:"), std::string::npos);
  EXPECT_EQ(ReadSmallFile("/proc/self/status", 5)->size(), 5u);
  EXPECT_FALSE(ReadSmallFile("/nonexistent/air-test-file").has_value());
}

std::string TempDir() {
  char tmpl[] = "/tmp/air_posix_io_test_XXXXXX";
  return ::mkdtemp(tmpl);
}

TEST(OpenOwnFileForWriteTest, CreatesAndAppendsToTheUsersOwnFile) {
  const std::string path = TempDir() + "/node_0.log";
  for (const char* line : {"one\n", "two\n"}) {
    auto fd = OpenOwnFileForWrite(path, O_CREAT | O_APPEND, 0600, "node log");
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    ASSERT_TRUE(WriteFully(*fd, line, "node log").ok());
    ::close(*fd);
  }
  EXPECT_EQ(ReadSmallFile(path).value_or(""), "one\ntwo\n");
}

TEST(OpenOwnFileForWriteTest, NeverWritesThroughAPlantedSymlink) {
  const std::string dir = TempDir();
  const std::string victim = dir + "/victim";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(victim, "precious\n", 0600).ok());
  ASSERT_EQ(::symlink(victim.c_str(), (dir + "/node_0.log").c_str()), 0);
  auto fd = OpenOwnFileForWrite(dir + "/node_0.log", O_CREAT | O_APPEND, 0600, "node log");
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), ErrorCode::kPermissionDenied);
  EXPECT_NE(fd.status().message().find("node log " + dir + "/node_0.log is a symlink"),
            std::string::npos)
      << fd.status().message();
  // The same through the Env (AppendToFile) and a truncating open.
  EXPECT_FALSE(DefaultEnv()->AppendToFile(dir + "/node_0.log", "x").ok());
  EXPECT_FALSE(DefaultEnv()->NewWritableFile(dir + "/node_0.log", WriteMode::kTruncate).ok());
  EXPECT_EQ(ReadSmallFile(victim).value_or(""), "precious\n");
}

TEST(OpenOwnFileForWriteTest, RefusesAPlantedFifoWithoutBlocking) {
  const std::string path = TempDir() + "/node_0.log";
  ASSERT_EQ(::mkfifo(path.c_str(), 0666), 0);
  auto fd = OpenOwnFileForWrite(path, O_CREAT | O_APPEND, 0600, "node log");
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find("node log " + path), std::string::npos)
      << fd.status().message();
}

TEST(OpenOwnFileForWriteTest, RefusesAFileAnotherUserPlanted) {
  if (::geteuid() != 0) GTEST_SKIP() << "chown to another user needs root";
  const std::string path = TempDir() + "/node_0.log";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(path, "", 0666).ok());
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  auto fd = OpenOwnFileForWrite(path, O_CREAT | O_APPEND, 0600, "node log");
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find("belongs to uid 65534 (mode 0666)"), std::string::npos)
      << fd.status().message();
  EXPECT_EQ(ReadSmallFile(path).value_or("?"), "");
}

}  // namespace
}  // namespace air
