// Tests for the POSIX helpers (posix_io.h): MergedEnvironment's overrides replace a variable in
// place, every copy of it when the inherited environment holds the name more than once (else
// getenv, which takes the first, would still see the old value), and are added when new.
#include "base/posix_io.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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

}  // namespace
}  // namespace air
