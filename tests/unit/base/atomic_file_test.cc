// AtomicFileWriter and Env::WriteFileAtomic, the one way air replaces a file: the target appears
// only on Commit, complete, with its exact mode; an abandoned or failed write leaves the old file
// and no temporary behind; a crash before the rename leaves the old file; errors name the path
// (a full disk says so). Faults come through the Env (tests/unit/fault_env.h).
#include "base/atomic_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "unit/fault_env.h"
#include "unit/runtime/test_util.h"

namespace air {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;

size_t Entries(const std::string& dir) { return DefaultEnv()->ListDir(dir)->size(); }

TEST(AtomicFileWriter, ReplacesOnlyOnCommitWithTheExactMode) {
  TempDir dir;
  Env* env = DefaultEnv();
  const std::string path = dir.path() + "/f.bin";
  ASSERT_TRUE(env->WriteFileAtomic(path, "old").ok());
  {
    AtomicFileWriter w(env, path, 0600);
    ASSERT_TRUE(w.Open().ok());
    ASSERT_TRUE(w.Append("new content", 11).ok());
    EXPECT_EQ(*env->ReadFile(path), "old");  // readers still see the old file
    ASSERT_TRUE(w.Commit().ok());
    EXPECT_EQ(w.bytes_written(), 11u);
  }
  EXPECT_EQ(*env->ReadFile(path), "new content");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Entries(dir.path()), 1u);
}

TEST(AtomicFileWriter, AbandonedWriteLeavesTheOldFileAndNoTemporary) {
  TempDir dir;
  Env* env = DefaultEnv();
  const std::string path = dir.path() + "/f.bin";
  ASSERT_TRUE(env->WriteFileAtomic(path, "old").ok());
  {
    AtomicFileWriter w(env, path);
    ASSERT_TRUE(w.Open().ok());
    ASSERT_TRUE(w.Append("partial", 7).ok());
  }  // no Commit: e.g. an error midway
  EXPECT_EQ(*env->ReadFile(path), "old");
  EXPECT_EQ(Entries(dir.path()), 1u);
}

TEST(AtomicFileWriter, CopiesAWholeFile) {
  TempDir dir;
  Env* env = DefaultEnv();
  std::string big(3 << 20, 'x');
  big[12345] = 'y';
  ASSERT_TRUE(env->WriteFileAtomic(dir.path() + "/from", big).ok());
  AtomicFileWriter w(env, dir.path() + "/to", 0400);
  ASSERT_TRUE(w.Open().ok());
  ASSERT_TRUE(w.AppendFileContents(dir.path() + "/from").ok());
  ASSERT_TRUE(w.Commit().ok());
  EXPECT_EQ(*env->ReadFile(dir.path() + "/to"), big);
  EXPECT_EQ(w.bytes_written(), big.size());
}

TEST(AtomicFileWriter, MissingDirectoryIsAnErrorNamingThePath) {
  Status s = DefaultEnv()->WriteFileAtomic("/nonexistent-dir-for-air/x/config.json", "{}");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent-dir-for-air/x/config.json"));
}

TEST(AtomicFileWriter, DiskFullNamesThePathAndLeavesTheOldFile) {
  TempDir dir;
  const std::string path = dir.path() + "/state.json";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(path, "old").ok());
  testing::FaultEnv full;
  full.FailWritesUnder(dir.path(), ENOSPC);
  Status s = full.WriteFileAtomic(path, "new");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("disk full writing " + path));
  EXPECT_EQ(*DefaultEnv()->ReadFile(path), "old");
  EXPECT_EQ(Entries(dir.path()), 1u);
}

// The death test forks (gtest's "fast" style): the child crashes writing this test's file.
TEST(AtomicFileWriter, CrashBeforeTheRenameLeavesTheOldFile) {
  TempDir dir;
  const std::string path = dir.path() + "/state.json";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(path, "old").ok());
  EXPECT_EXIT(
      {
        testing::FaultEnv crashing;
        crashing.BeforeRename([](const std::string&, const std::string&) { ::_exit(3); });
        (void)crashing.WriteFileAtomic(path, "new");
        ::_exit(0);
      },
      ::testing::ExitedWithCode(3), "");
  EXPECT_EQ(*DefaultEnv()->ReadFile(path), "old");
  // The crash left the data under a temporary name, which no reader opens.
  auto names = DefaultEnv()->ListDir(dir.path());
  ASSERT_EQ(names->size(), 2u);
  const std::string& temp = (*names)[0];  // ".state.json.tmp.<8 hex>" sorts first
  EXPECT_EQ(temp.rfind(".state.json.tmp.", 0), 0u) << temp;
  EXPECT_TRUE(IsAtomicTempName(temp)) << temp;
  EXPECT_EQ(*DefaultEnv()->ReadFile(dir.path() + "/" + temp), "new");
}

TEST(AtomicFileWriter, TemporaryNamesAreRecognisedAndNothingElse) {
  EXPECT_TRUE(IsAtomicTempName(AtomicTempName("model.safetensors")));
  EXPECT_TRUE(IsAtomicTempName(AtomicTempName(std::string(255, 'x'))));
  EXPECT_LE(AtomicTempName(std::string(255, 'x')).size(), 255u);  // NAME_MAX
  for (const char* user : {"state.json", "a.tmp.deadbeef", ".a.tmp.deadbee", ".a.tmp.DEADBEEF",
                           ".a.tmp.deadbeef.txt", ".tmp.", ""}) {
    EXPECT_FALSE(IsAtomicTempName(user)) << user;
  }
}

TEST(AtomicFileWriter, ErrorsNameTheTargetAsShownAndNoReplaceKeepsTheOldFile) {
  TempDir dir;
  const std::string path = dir.path() + "/state.json";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(path, "old").ok());
  AtomicFileWriter writer(DefaultEnv(), path, 0644, "runs/state.json");
  ASSERT_TRUE(writer.Open().ok());
  ASSERT_TRUE(writer.Append("new").ok());
  Status s = writer.CommitNoReplace();
  EXPECT_EQ(s.code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(s.message(), "'runs/state.json' already exists");
  EXPECT_EQ(*DefaultEnv()->ReadFile(path), "old");
  EXPECT_EQ(Entries(dir.path()), 1u);
  testing::FaultEnv full;
  full.FailWritesUnder(dir.path(), ENOSPC);
  AtomicFileWriter shown(&full, dir.path() + "/fresh.json", 0644, "runs/fresh.json");
  ASSERT_TRUE(shown.Open().ok());
  Status disk = shown.Append("data");
  EXPECT_THAT(disk.message(), HasSubstr("disk full writing runs/fresh.json"));
  EXPECT_THAT(disk.message(), Not(HasSubstr(dir.path())));
  EXPECT_EQ(Entries(dir.path()), 1u);
}

TEST(AtomicFileWriter, EioOnAReadNamesThePath) {
  TempDir dir;
  const std::string path = dir.path() + "/state.json";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(path, "data").ok());
  testing::FaultEnv failing;
  failing.FailReadsUnder(path, EIO);
  auto read = failing.ReadFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("read " + path));
  EXPECT_THAT(read.status().message(), HasSubstr("Input/output error"));
}

TEST(EnvLockFile, ExclusiveExcludesAndCancels) {
  TempDir dir;
  Env* env = DefaultEnv();
  const std::string lock_path = dir.path() + "/x.lock";
  auto held = env->LockFile(lock_path, FileLock::Mode::kExclusive);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  int polls = 0;
  auto second = env->LockFile(lock_path, FileLock::Mode::kShared, [&] { return ++polls >= 3; });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), ErrorCode::kCancelled);
  EXPECT_THAT(second.status().message(), HasSubstr(lock_path));
  *held = FileLock();  // released
  auto shared_a = env->LockFile(lock_path, FileLock::Mode::kShared, [] { return true; });
  auto shared_b = env->LockFile(lock_path, FileLock::Mode::kShared, [] { return true; });
  EXPECT_TRUE(shared_a.ok() && shared_b.ok());
}

}  // namespace
}  // namespace air
