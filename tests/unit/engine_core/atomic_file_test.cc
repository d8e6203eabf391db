// AtomicFileWriter: the target appears only on Commit, complete; an abandoned or failed write
// leaves the old file and no temporary behind; errors name the path.
#include "engine/io/atomic_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "test_util.h"

namespace air::engine {
namespace {

using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::ScratchDir;
using testing::WriteBytes;

size_t CountEntries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(AtomicFile, ReplacesOnlyOnCommit) {
  ScratchDir dir;
  const std::string path = dir / "f.bin";
  WriteBytes(path, "old");
  {
    AtomicFileWriter w(path);
    ASSERT_TRUE(w.Open().ok());
    ASSERT_TRUE(w.Append("new content", 11).ok());
    EXPECT_EQ(ReadBytes(path), "old");  // readers still see the old file
    ASSERT_TRUE(w.Commit().ok());
    EXPECT_EQ(w.bytes_written(), 11u);
  }
  EXPECT_EQ(ReadBytes(path), "new content");
  EXPECT_EQ(CountEntries(dir.path()), 1u);
}

TEST(AtomicFile, AbandonedWriteLeavesTheOldFileAndNoTemporary) {
  ScratchDir dir;
  const std::string path = dir / "f.bin";
  WriteBytes(path, "old");
  {
    AtomicFileWriter w(path);
    ASSERT_TRUE(w.Open().ok());
    ASSERT_TRUE(w.Append("partial", 7).ok());
  }  // no Commit: e.g. an error midway
  EXPECT_EQ(ReadBytes(path), "old");
  EXPECT_EQ(CountEntries(dir.path()), 1u);
}

TEST(AtomicFile, MissingDirectoryIsAnErrorNamingThePath) {
  Status s = WriteFileAtomically("/nonexistent-dir-for-air/x/config.json", "{}");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent-dir-for-air/x/config.json"));
}

}  // namespace
}  // namespace air::engine
