// Tests for reading logs from their end (runtime/log_reader.h) and the node log's size cap with
// rotation (agent/log_format.h): tails span rotated parts, the follower reads a block at a
// time and keeps reading across a rotation, overlong lines are cut.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "agent/log_format.h"
#include "runtime/log_reader.h"
#include "runtime/watch.h"
#include "test_util.h"

namespace air {
namespace {

using air::testing::TempDir;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string Numbered(int from, int to) {
  std::string text;
  for (int i = from; i < to; ++i) text += "line " + std::to_string(i) + "\n";
  return text;
}

TEST(LogTailTest, LastLinesAcrossBlocksAndWithoutFinalNewline) {
  TempDir dir;
  std::string path = dir.path() + "/log";
  WriteText(path, Numbered(0, 20000) + "partial");
  auto last = runtime::ReadLastLines(DefaultEnv(), path, 3);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, (std::vector<std::string>{"line 19998", "line 19999", "partial"}));
  auto all = runtime::ReadLastLines(DefaultEnv(), path, 0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 20001u);
  EXPECT_EQ(all->front(), "line 0");
  WriteText(path, "a\n\nb\n");
  EXPECT_EQ(*runtime::ReadLastLines(DefaultEnv(), path, 0),
            (std::vector<std::string>{"a", "", "b"}));
  WriteText(path, "");
  EXPECT_TRUE(runtime::ReadLastLines(DefaultEnv(), path, 5)->empty());
}

TEST(LogTailTest, KeepStopsAtTheFirstRejectedLineFromTheEnd) {
  TempDir dir;
  std::string path = dir.path() + "/log";
  WriteText(path, "old 1\nnew 2\nold 3\nnew 4\nnew 5\n");
  auto recent = runtime::ReadLastLines(
      DefaultEnv(), path, 0, [](const std::string& line) { return line.rfind("new", 0) == 0; });
  EXPECT_EQ(*recent, (std::vector<std::string>{"new 4", "new 5"}));
}

TEST(LogTailTest, OverlongLinesAreCutToTheirBeginning) {
  TempDir dir;
  std::string path = dir.path() + "/log";
  std::string huge(runtime::kMaxLogLineBytes * 5 + 7, 'x');
  huge[0] = 'S';
  WriteText(path, "before\n" + huge + "\nafter\n");
  auto lines = runtime::ReadLastLines(DefaultEnv(), path, 0);
  ASSERT_EQ(lines->size(), 3u);
  EXPECT_EQ((*lines)[1].substr(0, 2), "Sx");
  EXPECT_NE((*lines)[1].find(std::to_string(huge.size() - runtime::kMaxLogLineBytes) +
                             " more bytes of this line not shown"),
            std::string::npos);
  EXPECT_LT((*lines)[1].size(), runtime::kMaxLogLineBytes + 100);
  runtime::LogFollower follower(path);
  std::vector<std::string> seen;
  do {
    auto block = follower.ReadNew(true);
    ASSERT_TRUE(block.ok());
    seen.insert(seen.end(), block->begin(), block->end());
  } while (follower.more());
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1], (*lines)[1]);
}

TEST(LogTailTest, FollowerReadsABlockAtATimeAndCanStartAtTheEnd) {
  TempDir dir;
  std::string path = dir.path() + "/log";
  WriteText(path, Numbered(0, 300000));  // about 3.4 MB
  runtime::LogFollower follower(path);
  auto first = follower.ReadNew(false);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(follower.more());
  EXPECT_LT(first->size(), 300000u);
  runtime::LogFollower tail(path);
  ASSERT_TRUE(tail.StartAtLastLines(2).ok());
  EXPECT_EQ(*tail.ReadNew(false), (std::vector<std::string>{"line 299998", "line 299999"}));
  std::ofstream(path, std::ios::app) << "line 300000\n";
  EXPECT_EQ(*tail.ReadNew(false), (std::vector<std::string>{"line 300000"}));
}

TEST(LogRotationTest, CapRotatesAndKeepsParts) {
  TempDir dir;
  std::string path = dir.path() + "/node_0.log";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  agent::LogLineWriter writer(fd, DefaultEnv(), {path, 4000, 2});
  agent::LogLineWriter::Stream out{"out", nullptr, ""};
  runtime::LogFollower follower(path);
  std::vector<std::string> followed;
  auto drain = [&] {
    do {
      auto block = follower.ReadNew(false);
      ASSERT_TRUE(block.ok());
      for (auto& line : *block) followed.push_back(runtime::RenderLogLine(line, false));
    } while (follower.more());
  };
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(writer.Write(out, "record " + std::to_string(i) + "\n").ok());
    if (i % 20 == 0) drain();  // the follower keeps up across rotations
  }
  drain();
  ::close(fd);
  for (const char* suffix : {"", ".1", ".2"}) {
    auto size = DefaultEnv()->FileSize(path + suffix);
    ASSERT_TRUE(size.ok()) << suffix;
    EXPECT_LE(*size, 4000u) << suffix;
  }
  EXPECT_FALSE(DefaultEnv()->FileExists(path + ".3"));
  ASSERT_EQ(followed.size(), 400u);
  EXPECT_EQ(followed.back(), "record 399");
  EXPECT_EQ(followed[123], "record 123");
  // A tail spans the parts, oldest first, and ends with the last record.
  auto tail = runtime::ReadLastLines(DefaultEnv(), path, 150);
  ASSERT_EQ(tail->size(), 150u);
  EXPECT_EQ(runtime::RenderLogLine(tail->front(), false), "record 250");
  EXPECT_EQ(runtime::RenderLogLine(tail->back(), false), "record 399");
}

}  // namespace
}  // namespace air
