// Tests for MakePrivateDir: a directory air keeps its state in is created private, an existing
// one is used only when it is the user's and nobody else can write to it, and every refusal
// names the path, its owner and its mode. Real directories; the Env seam stands in for another
// user only where the test does not run as root (it cannot chown then).
#include "base/private_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/env_wrapper.h"

namespace air {
namespace {

constexpr uid_t kNobody = 65534;

std::string TempDir() {
  char tmpl[] = "/tmp/air_private_dir_test_XXXXXX";
  return ::mkdtemp(tmpl);
}

mode_t ModeOf(const std::string& path) {
  struct stat sb {};
  EXPECT_EQ(::stat(path.c_str(), &sb), 0) << path;
  return sb.st_mode & 07777;
}

bool Contains(const Status& status, const std::string& text) {
  return status.message().find(text) != std::string::npos;
}

// Reports every path as owned by another user (what another user's directory looks like to a
// process that cannot chown one into place).
class OtherOwnerEnv : public EnvWrapper {
 public:
  OtherOwnerEnv() : EnvWrapper(DefaultEnv()) {}
  Result<PathInfo> GetPathInfo(const std::string& path, bool follow_symlinks) override {
    AIR_ASSIGN_OR_RETURN(PathInfo info, target()->GetPathInfo(path, follow_symlinks));
    info.owner = ::geteuid() + 1;
    return info;
  }
};

// Another process creates the directory, world-writable, just before air's mkdir: the check
// after creating must still refuse it.
class RacedCreateEnv : public EnvWrapper {
 public:
  RacedCreateEnv() : EnvWrapper(DefaultEnv()) {}
  Status CreateDirs(const std::string& path, mode_t) override {
    AIR_RETURN_IF_ERROR(target()->CreateDirs(path, 0700));
    if (::chmod(path.c_str(), 0777) != 0) return ErrnoStatus("chmod " + path, errno);
    return target()->CreateDirs(path, 0700);  // EEXIST: what air's own mkdir -p then sees
  }
};

TEST(MakePrivateDirTest, CreatesAMissingDirectoryAndItsParentsPrivate) {
  const std::string dir = TempDir() + "/a/b";
  ASSERT_TRUE(MakePrivateDir(dir, DefaultEnv()).ok());
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(dir.substr(0, dir.rfind('/'))), 0700u);
  ASSERT_TRUE(MakePrivateDir(dir, DefaultEnv()).ok());  // reusing it is fine
}

TEST(MakePrivateDirTest, TightensTheUsersOwnReadableDirectory) {
  const std::string dir = TempDir() + "/home";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  ASSERT_TRUE(MakePrivateDir(dir, DefaultEnv()).ok());
  EXPECT_EQ(ModeOf(dir), 0700u);
}

TEST(MakePrivateDirTest, RefusesTheUsersOwnDirectoryWhenOthersCanWriteToIt) {
  const std::string dir = TempDir() + "/home";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  Status st = MakePrivateDir(dir, DefaultEnv(), "AIR_HOME");
  ASSERT_EQ(st.code(), ErrorCode::kPermissionDenied) << st.ToString();
  EXPECT_TRUE(Contains(st, "AIR_HOME " + dir)) << st.message();
  EXPECT_TRUE(Contains(st, "writable by others (mode 0777)")) << st.message();
  EXPECT_TRUE(Contains(st, "that group and others cannot write")) << st.message();
  EXPECT_EQ(ModeOf(dir), 0777u);  // left as found: the user decides what to do with it

  ASSERT_EQ(::chmod(dir.c_str(), 0770), 0);
  st = MakePrivateDir(dir, DefaultEnv());
  EXPECT_TRUE(Contains(st, "writable by its group (mode 0770)")) << st.message();
}

TEST(MakePrivateDirTest, RefusesAnotherUsersDirectoryThroughTheEnv) {
  const std::string dir = TempDir() + "/home";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  OtherOwnerEnv env;
  Status st = MakePrivateDir(dir, &env, "shared_root");
  ASSERT_EQ(st.code(), ErrorCode::kPermissionDenied) << st.ToString();
  EXPECT_TRUE(Contains(st, "shared_root " + dir + " belongs to")) << st.message();
  EXPECT_TRUE(Contains(st, "(mode 0700)")) << st.message();
}

TEST(MakePrivateDirTest, RefusesADirectoryAnotherProcessCreatedLooseFirst) {
  const std::string dir = TempDir() + "/home";
  RacedCreateEnv env;
  Status st = MakePrivateDir(dir, &env);
  ASSERT_EQ(st.code(), ErrorCode::kPermissionDenied) << st.ToString();
  EXPECT_TRUE(Contains(st, "mode 0777")) << st.message();
}

TEST(MakePrivateDirTest, RefusesAFileWhereTheDirectoryShouldBe) {
  const std::string path = TempDir() + "/file";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(path, "x", 0600).ok());
  Status st = MakePrivateDir(path, DefaultEnv());
  EXPECT_EQ(st.code(), ErrorCode::kFailedPrecondition) << st.ToString();
  EXPECT_TRUE(Contains(st, path + " exists and is not a directory")) << st.message();
}

TEST(MakePrivateDirTest, FollowsTheUsersOwnSymlinkToTheUsersOwnDirectory) {
  const std::string base = TempDir();
  ASSERT_EQ(::mkdir((base + "/real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((base + "/real").c_str(), (base + "/link").c_str()), 0);
  EXPECT_TRUE(MakePrivateDir(base + "/link", DefaultEnv()).ok());
}

// As root the other user is real: a directory and a symlink chowned to nobody.
TEST(MakePrivateDirTest, RefusesARealDirectoryAndSymlinkOfAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "chown to another user needs root";
  const std::string base = TempDir();
  const std::string planted = base + "/planted";
  ASSERT_EQ(::mkdir(planted.c_str(), 0700), 0);
  ASSERT_EQ(::chown(planted.c_str(), kNobody, kNobody), 0);
  Status st = MakePrivateDir(planted, DefaultEnv(), "AIR_HOME");
  ASSERT_EQ(st.code(), ErrorCode::kPermissionDenied) << st.ToString();
  EXPECT_TRUE(Contains(st, "belongs to")) << st.message();
  EXPECT_TRUE(Contains(st, "uid 65534")) << st.message();

  // The user's own directory, reached through a symlink another user owns: refused too (the
  // link's owner could point it elsewhere at any time).
  ASSERT_EQ(::mkdir((base + "/mine").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((base + "/mine").c_str(), (base + "/link").c_str()), 0);
  ASSERT_EQ(::lchown((base + "/link").c_str(), kNobody, kNobody), 0);
  st = MakePrivateDir(base + "/link", DefaultEnv());
  ASSERT_EQ(st.code(), ErrorCode::kPermissionDenied) << st.ToString();
  EXPECT_TRUE(Contains(st, "is a symlink owned by")) << st.message();
}

}  // namespace
}  // namespace air
