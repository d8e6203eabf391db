// Tests for the node log format (writer, parser), the log follower, tails and failure
// summaries built from logs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "agent/log_format.h"
#include "base/strings.h"
#include "runtime/failure.h"
#include "runtime/log_reader.h"
#include "runtime/watch.h"
#include "test_util.h"

namespace air {
namespace {

using air::testing::TempDir;

TEST(LogFormatTest, TimestampFormat) {
  EXPECT_EQ(agent::FormatLogTimestamp(1'700'000'000'123'456), "2023-11-14T22:13:20.123456Z");
}

TEST(LogFormatTest, ParseRoundTripsAndRejectsOtherText) {
  auto r = agent::ParseLogLine("2023-11-14T22:13:20.123456Z err hello world ");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->stream, "err");
  EXPECT_EQ(r->text, "hello world ");
  auto empty = agent::ParseLogLine("2023-11-14T22:13:20.123456Z out");
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->text, "");
  EXPECT_FALSE(agent::ParseLogLine("Collecting torch").has_value());
  EXPECT_FALSE(agent::ParseLogLine("2023-11-14T22:13:20.123456Z xyz text").has_value());
}

TEST(LogFormatTest, WriterSplitsLinesAcrossChunksAndStreams) {
  TempDir dir;
  std::string path = dir.path() + "/log";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(fd, 0);
  agent::LogLineWriter writer(fd, DefaultEnv());
  agent::LogLineWriter::Stream out{"out", std::make_unique<agent::PassThroughFilter>(), ""};
  agent::LogLineWriter::Stream err{"err", nullptr, ""};
  ASSERT_TRUE(writer.Write(out, "first li").ok());
  ASSERT_TRUE(writer.Write(err, "an error\n").ok());
  ASSERT_TRUE(writer.Write(out, "ne\nsecond\nthi").ok());
  ASSERT_TRUE(writer.Note("stopping").ok());
  ASSERT_TRUE(writer.Finish(out).ok());
  ASSERT_TRUE(writer.Finish(err).ok());
  ::close(fd);
  auto lines = runtime::ReadLogLines(DefaultEnv(), path);
  ASSERT_TRUE(lines.ok());
  std::vector<std::string> rendered;
  for (const auto& line : *lines) rendered.push_back(runtime::RenderLogLine(line, false));
  EXPECT_EQ(rendered, (std::vector<std::string>{"an error", "first line", "second",
                                                "[air] stopping", "thi"}));
}

TEST(LogFormatTest, OverlongLinesAreCut) {
  TempDir dir;
  std::string path = dir.path() + "/log";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  agent::LogLineWriter writer(fd, DefaultEnv());
  agent::LogLineWriter::Stream out{"out", nullptr, ""};
  std::string big(agent::LogLineWriter::kMaxLineBytes + 10, 'x');
  ASSERT_TRUE(writer.Write(out, big).ok());
  ASSERT_TRUE(writer.Finish(out).ok());
  ::close(fd);
  auto lines = runtime::ReadLogLines(DefaultEnv(), path);
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ(agent::ParseLogLine((*lines)[1])->text, "xxxxxxxxxx");
}

TEST(LogFollowerTest, ReturnsOnlyCompleteNewLines) {
  TempDir dir;
  std::string path = dir.path() + "/log";
  runtime::LogFollower follower(path);
  EXPECT_TRUE(follower.ReadNew(false)->empty());  // not there yet
  ASSERT_TRUE(DefaultEnv()->AppendToFile(path, "one\ntw").ok());
  EXPECT_EQ(*follower.ReadNew(false), std::vector<std::string>{"one"});
  ASSERT_TRUE(DefaultEnv()->AppendToFile(path, "o\nthree").ok());
  EXPECT_EQ(*follower.ReadNew(false), std::vector<std::string>{"two"});
  EXPECT_EQ(*follower.ReadNew(true), std::vector<std::string>{"three"});
  EXPECT_TRUE(follower.ReadNew(true)->empty());
}

TEST(LogReaderTest, TailLines) {
  std::vector<std::string> lines = {"a", "b", "c"};
  EXPECT_EQ(runtime::TailLines(lines, 2), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(runtime::TailLines(lines, 0), lines);
  EXPECT_EQ(runtime::TailLines(lines, 10), lines);
}

TEST(FailureTest, DescribesEndings) {
  agent::NodeExitReport exited;
  exited.exit_code = 3;
  EXPECT_EQ(runtime::DescribeNodeEnding(exited), "exited with code 3");
  agent::NodeExitReport killed;
  killed.signal = 9;
  EXPECT_EQ(runtime::DescribeNodeEnding(killed),
            "was killed by signal 9 (SIGKILL): killed — out of memory?");
  agent::NodeExitReport child_killed;
  child_killed.exit_code = 137;
  EXPECT_NE(runtime::DescribeNodeEnding(child_killed).find("out of memory?"), std::string::npos);
  agent::NodeExitReport broken;
  broken.error = "cannot open log";
  EXPECT_EQ(runtime::DescribeNodeEnding(broken), "could not run: cannot open log");
}

TEST(FailureTest, SummaryNamesNodeAndLastOutputLines) {
  TempDir dir;
  std::string path = dir.path() + "/node_1.log";
  std::string log;
  for (int i = 0; i < 15; ++i) {
    log += agent::FormatLogTimestamp(1'000'000) + " out line " + std::to_string(i) + "\n";
  }
  log += agent::FormatLogTimestamp(1'000'000) + " air command exited with code 3\n";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(path, log).ok());
  std::string summary = runtime::NodeFailureSummary(1, 0, "exited with code 3", path);
  auto lines = Split(summary, '\n');
  ASSERT_EQ(lines.size(), 12u) << summary;
  EXPECT_EQ(lines[0], "node 1 exited with code 3");
  EXPECT_EQ(lines[1], "last lines of node 1 (attempt 0):");
  EXPECT_EQ(lines[2], "  line 5");
  EXPECT_EQ(lines[11], "  line 14");
}

TEST(FailureTest, SummaryOfAHugeLogStaysShortAndKeepsTheLastLines) {
  // 8 MiB of 64 KiB lines (a progress bar without newlines, base64), then the real error: the
  // summary reads only the end of the log and cuts long lines, at a UTF-8 character boundary.
  TempDir dir;
  std::string path = dir.path() + "/node_0.log";
  std::string record_start = agent::FormatLogTimestamp(1'000'000) + " out ";
  std::string euros;
  for (int i = 0; i < 21000; ++i) euros += "\xe2\x82\xac";  // U+20AC: 3 bytes each
  std::string huge_line = record_start + euros + "\n";
  std::string log;
  for (int i = 0; i < 128; ++i) log += huge_line;
  log += record_start + "Traceback: the real error\n";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(path, log).ok());
  std::string summary = runtime::NodeFailureSummary(0, 0, "exited with code 1", path);
  EXPECT_LT(summary.size(), 10u * 1024) << summary.size();
  auto lines = Split(summary, '\n');
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines.back(), "  Traceback: the real error");
  const std::string& cut = lines[lines.size() - 2];
  EXPECT_LT(cut.size(), 600u);
  EXPECT_EQ(cut.rfind("  \xe2\x82\xac", 0), 0u) << cut;
  EXPECT_NE(cut.find("\xe2\x82\xac… ("), std::string::npos) << cut;
  EXPECT_NE(cut.find(" more bytes)"), std::string::npos) << cut;
  EXPECT_TRUE(IsValidUtf8(cut));
}

}  // namespace
}  // namespace air
