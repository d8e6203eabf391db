// Tests for base/rooted_dir.h on a real file system: a symbolic link anywhere on a path below
// the root is refused (never followed, whatever it points at), listing shows a link as a link,
// removal takes a link itself and never its target, and a PendingFile appears only whole (and
// not at all when dropped, on a full disk or after a crash before its rename: the faults of
// `air volumes cp` and an artifact upload, injected through the Env), its errors naming the
// user's path.
#include "base/rooted_dir.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "unit/fault_env.h"

namespace air {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class RootedDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path(::testing::TempDir()) /
            ("rooted_dir_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    root_ = base_ / "root";
    outside_ = base_ / "outside";
    fs::create_directories(root_ / "a" / "b");
    fs::create_directories(outside_);
    Write(outside_ / "secret", "outside the root");
    Write(root_ / "a" / "b" / "file", "inside");
    fs::create_directory_symlink(outside_, root_ / "a" / "link_dir");
    fs::create_symlink(outside_ / "secret", root_ / "a" / "link_file");
  }
  void TearDown() override { fs::remove_all(base_); }

  static void Write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }
  static std::string Read(int fd) {
    std::string out(4096, '\0');
    ssize_t n = ::pread(fd, out.data(), out.size(), 0);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return out;
  }

  fs::path base_, root_, outside_;
};

TEST_F(RootedDirTest, ReadsBelowTheRootAndRefusesEveryLink) {
  auto dir = RootedDir::Open(root_.string(), "/Volumes");
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  auto file = dir->OpenFileForRead("a/b/file");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(Read(file->get()), "inside");

  for (const char* rel : {"a/link_dir/secret", "a/link_file"}) {
    auto refused = dir->OpenFileForRead(rel);
    ASSERT_FALSE(refused.ok()) << rel;
    EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("symbolic link"), std::string::npos)
        << refused.status().message();
  }
  auto through = dir->OpenDir("a/link_dir", false);
  ASSERT_FALSE(through.ok());
  EXPECT_NE(through.status().message().find("'/Volumes/a/link_dir' is a symbolic link"),
            std::string::npos)
      << through.status().message();
  // Creating below a link is refused too: nothing appears outside.
  auto created = dir->OpenDir("a/link_dir/new", true);
  EXPECT_FALSE(created.ok());
  EXPECT_FALSE(fs::exists(outside_ / "new"));
  for (const char* bad : {"../outside/secret", "a/../../outside/secret", "/etc/passwd", "a//b"}) {
    EXPECT_EQ(dir->OpenFileForRead(bad).status().code(), ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(dir->OpenFileForRead("a/none").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(dir->OpenFileForRead("a/b").status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(RootedDirTest, ListingShowsLinksAsLinks) {
  auto dir = RootedDir::Open(root_.string(), "");
  ASSERT_TRUE(dir.ok());
  auto a = dir->OpenDir("a", false);
  ASSERT_TRUE(a.ok());
  auto entries = ListDirAt(a->get(), "a");
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].name, "b");
  EXPECT_EQ((*entries)[0].type, DirEntry::Type::kDirectory);
  EXPECT_EQ((*entries)[1].name, "link_dir");
  EXPECT_EQ((*entries)[1].type, DirEntry::Type::kSymlink);
  EXPECT_EQ((*entries)[2].type, DirEntry::Type::kSymlink);
  auto st = dir->Lstat("a/link_file");
  ASSERT_TRUE(st.ok() && st->has_value());
  EXPECT_TRUE(S_ISLNK((*st)->st_mode));
  EXPECT_FALSE(dir->Lstat("a/missing")->has_value());
}

TEST_F(RootedDirTest, RemovalTakesLinksNotTheirTargets) {
  auto dir = RootedDir::Open(root_.string(), "");
  ASSERT_TRUE(dir.ok());
  std::string leaf;
  auto parent = dir->OpenParent("a", false, &leaf);
  ASSERT_TRUE(parent.ok());
  auto removed = RemoveAt(parent->get(), leaf, /*recursive=*/true, "a");
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(*removed, 5u);  // a, a/b, a/b/file and the two links
  EXPECT_FALSE(fs::exists(root_ / "a"));
  EXPECT_TRUE(fs::exists(outside_ / "secret"));
}

TEST_F(RootedDirTest, PendingFilesAppearWholeOrNotAtAll) {
  auto dir = RootedDir::Open(root_.string(), "");
  ASSERT_TRUE(dir.ok());
  std::string leaf;
  auto parent = dir->OpenParent("new/dir/out.bin", true, &leaf, 0700);
  ASSERT_TRUE(parent.ok()) << parent.status().message();
  {
    auto dropped = PendingFile::Create(DefaultEnv(), parent->get(), leaf, 0600, "out.bin");
    ASSERT_TRUE(dropped.ok());
    ASSERT_TRUE(dropped->Write("half").ok());
  }
  EXPECT_TRUE(fs::is_empty(root_ / "new" / "dir"));  // the temporary file went with it
  auto file = PendingFile::Create(DefaultEnv(), parent->get(), leaf, 0600, "out.bin");
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(file->Write("whole").ok());
  EXPECT_FALSE(fs::exists(root_ / "new" / "dir" / "out.bin"));
  ASSERT_TRUE(file->Commit(false).ok());
  std::ifstream in(root_ / "new" / "dir" / "out.bin");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "whole");
  EXPECT_EQ(fs::status(root_ / "new" / "dir" / "out.bin").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  // Without replace, an existing file stays.
  auto again = PendingFile::Create(DefaultEnv(), parent->get(), leaf, 0600, "out.bin");
  ASSERT_TRUE(again.ok());
  Status refused = again->Commit(false);
  EXPECT_EQ(refused.code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(refused.message(), "'out.bin' already exists");
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ / "new" / "dir"), {}), 1);
  // A link in place of the target is replaced itself, never written through.
  fs::create_symlink(outside_ / "secret", root_ / "new" / "dir" / "linked");
  auto over = PendingFile::Create(DefaultEnv(), parent->get(), "linked", 0600, "linked");
  ASSERT_TRUE(over.ok());
  ASSERT_TRUE(over->Write("replaced").ok());
  ASSERT_TRUE(over->Commit(true).ok());
  EXPECT_FALSE(fs::is_symlink(root_ / "new" / "dir" / "linked"));
  std::ifstream secret(outside_ / "secret");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(secret), {}), "outside the root");
}

// The names in `dir`, sorted.
std::vector<std::string> Names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(RootedDirTest, AFullDiskLeavesTheOldFileAndNamesTheUsersPath) {
  Write(root_ / "a" / "out.bin", "old");
  auto dir = RootedDir::Open(root_.string(), "/Volumes");
  ASSERT_TRUE(dir.ok());
  std::string leaf;
  auto parent = dir->OpenParent("a/out.bin", false, &leaf);
  ASSERT_TRUE(parent.ok()) << parent.status().message();
  testing::FaultEnv full;
  full.FailWritesUnder("/proc/self/fd/", ENOSPC);
  auto file = PendingFile::Create(&full, parent->get(), leaf, 0644, "/Volumes/a/out.bin");
  ASSERT_TRUE(file.ok()) << file.status().message();
  Status s = file->Write("new");
  EXPECT_EQ(full.writes_failed(), 1);
  EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("disk full writing /Volumes/a/out.bin"));
  EXPECT_THAT(s.message(), Not(HasSubstr("/proc/")));
  EXPECT_FALSE(file->Commit(true).ok());
  EXPECT_EQ(Slurp(root_ / "a" / "out.bin"), "old");
  EXPECT_EQ(Names(root_ / "a"),
            (std::vector<std::string>{"b", "link_dir", "link_file", "out.bin"}));
}

// The death test forks: the child crashes between the last write and the rename.
TEST_F(RootedDirTest, ACrashBeforeTheRenameLeavesTheOldFileAndAHiddenTemporary) {
  Write(root_ / "a" / "out.bin", "old");
  auto dir = RootedDir::Open(root_.string(), "");
  ASSERT_TRUE(dir.ok());
  std::string leaf;
  auto parent = dir->OpenParent("a/out.bin", false, &leaf);
  ASSERT_TRUE(parent.ok()) << parent.status().message();
  for (bool replace : {true, false}) {
    EXPECT_EXIT(
        {
          testing::FaultEnv crashing;
          crashing.BeforeRename([](const std::string&, const std::string&) { ::_exit(3); });
          auto file = PendingFile::Create(&crashing, parent->get(), leaf, 0644, "a/out.bin");
          if (!file.ok() || !file->Write("new").ok()) ::_exit(1);
          (void)file->Commit(replace);
          ::_exit(0);
        },
        ::testing::ExitedWithCode(3), "");
  }
  EXPECT_EQ(Slurp(root_ / "a" / "out.bin"), "old");
  // The data lies under temporary names that listings (artifacts, volumes) leave out.
  int temporaries = 0;
  for (const std::string& name : Names(root_ / "a")) {
    if (!IsAtomicTempName(name)) continue;
    ++temporaries;
    EXPECT_EQ(Slurp(root_ / "a" / name), "new");
  }
  EXPECT_EQ(temporaries, 2);
}

}  // namespace
}  // namespace air
