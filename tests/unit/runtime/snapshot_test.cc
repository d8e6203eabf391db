// Tests for code snapshots: content-addressed archiving with deduplication, read-only
// materialization with modes and symlinks, immutability after submit, and git revisions.
#include "runtime/snapshot.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/subprocess.h"
#include "test_util.h"

namespace air::runtime {
namespace {

using air::testing::TempDir;

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = code_.path();
    Env* env = DefaultEnv();
    ASSERT_TRUE(env->CreateDirs(root_ + "/pkg").ok());
    ASSERT_TRUE(env->WriteFileAtomic(root_ + "/train.py", "print('hi')\n").ok());
    ASSERT_TRUE(env->WriteFileAtomic(root_ + "/pkg/util.py", "X = 1\n").ok());
    ASSERT_TRUE(env->WriteFileAtomic(root_ + "/run.sh", "#!/bin/sh\necho run\n", 0755).ok());
    ASSERT_TRUE(env->WriteFileAtomic(root_ + "/copy.py", "print('hi')\n").ok());  // same content
    ASSERT_EQ(::symlink("train.py", (root_ + "/link.py").c_str()), 0);
  }

  spec::SnapshotListing Scan() {
    spec::SnapshotSpec snapshot;
    snapshot.root_path = root_;
    snapshot.resolved_root = root_;
    auto listing = spec::ScanSnapshot(snapshot, DefaultEnv());
    EXPECT_TRUE(listing.ok()) << listing.status().ToString();
    return *listing;
  }

  TempDir home_;
  TempDir code_;
  std::string root_;
};

TEST_F(SnapshotTest, ArchiveDeduplicatesAndMaterializesReadOnly) {
  Layout layout(home_.path());
  auto first = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->entries.size(), 5u);
  EXPECT_EQ(first->new_blobs, 3u);  // train.py and copy.py share one blob
  auto second = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->id, first->id);
  EXPECT_EQ(second->new_blobs, 0u);

  auto loaded = LoadSnapshot(layout, first->id, DefaultEnv());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  std::string dest = home_.path() + "/node_0";
  ASSERT_TRUE(MaterializeSnapshot(layout, *loaded, dest, DefaultEnv()).ok());
  EXPECT_EQ(*DefaultEnv()->ReadFile(dest + "/pkg/util.py"), "X = 1\n");
  struct stat st;
  ASSERT_EQ(::stat((dest + "/train.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u);  // read-only, private
  ASSERT_EQ(::stat((dest + "/run.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0500u);
  char target[64] = {};
  ASSERT_GT(::readlink((dest + "/link.py").c_str(), target, sizeof(target) - 1), 0);
  EXPECT_STREQ(target, "train.py");
  // Files are read-only (mode bits: root would bypass an access() check); the directory stays
  // writable for caches and outputs.
  ASSERT_EQ(::stat(dest.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0200, 0200u);
  // Materializing again (another node) works and shares the blobs.
  ASSERT_TRUE(MaterializeSnapshot(layout, *loaded, home_.path() + "/node_1", DefaultEnv()).ok());
}

TEST_F(SnapshotTest, LaterEditsDoNotChangeASubmittedSnapshot) {
  Layout layout(home_.path());
  auto before = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(root_ + "/train.py", "print('edited')\n").ok());
  auto after = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->id, before->id);
  std::string dest = home_.path() + "/old";
  ASSERT_TRUE(MaterializeSnapshot(layout, *before, dest, DefaultEnv()).ok());
  EXPECT_EQ(*DefaultEnv()->ReadFile(dest + "/train.py"), "print('hi')\n");
}

TEST_F(SnapshotTest, DamagedBlobIsReportedAndHealedByArchivingAgain) {
  Layout layout(home_.path());
  auto snapshot = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(snapshot.ok());
  std::string blob;
  for (const auto& e : snapshot->entries) {
    if (e.path == "pkg/util.py") blob = layout.CasPath(e.digest);
  }
  ASSERT_EQ(::chmod(blob.c_str(), 0644), 0);
  ASSERT_EQ(::truncate(blob.c_str(), 0), 0);
  Status broken = MaterializeSnapshot(layout, *snapshot, home_.path() + "/n", DefaultEnv());
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.code(), ErrorCode::kDataLoss);
  EXPECT_NE(broken.message().find("pkg/util.py"), std::string::npos);
  ASSERT_TRUE(ArchiveSnapshot(layout, Scan(), DefaultEnv()).ok());
  EXPECT_TRUE(MaterializeSnapshot(layout, *snapshot, home_.path() + "/n", DefaultEnv()).ok());
}

// A job that writes to its code anyway (root ignores the read-only mode; an owner may chmod)
// changes only its own node's copy: not the other nodes', not the stored blob, not later runs'.
TEST_F(SnapshotTest, AWriteToANodesFileDoesNotReachOtherNodesOrLaterRuns) {
  Layout layout(home_.path());
  auto snapshot = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(snapshot.ok());
  std::string node0 = home_.path() + "/node_0";
  std::string node1 = home_.path() + "/node_1";
  ASSERT_TRUE(MaterializeSnapshot(layout, *snapshot, node0, DefaultEnv()).ok());
  ASSERT_TRUE(MaterializeSnapshot(layout, *snapshot, node1, DefaultEnv()).ok());
  ASSERT_EQ(::chmod((node0 + "/train.py").c_str(), 0644), 0);
  {
    int fd = ::open((node0 + "/train.py").c_str(), O_WRONLY | O_TRUNC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "print('XX')\n", 12), 12);  // same size as the original
    ::close(fd);
  }
  EXPECT_EQ(*DefaultEnv()->ReadFile(node1 + "/train.py"), "print('hi')\n");
  struct stat st;
  ASSERT_EQ(::stat((node1 + "/train.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0400u);  // read-only, private
  std::string later = home_.path() + "/later_run";
  ASSERT_TRUE(MaterializeSnapshot(layout, *snapshot, later, DefaultEnv()).ok());
  EXPECT_EQ(*DefaultEnv()->ReadFile(later + "/train.py"), "print('hi')\n");
  EXPECT_EQ(*DefaultEnv()->ReadFile(later + "/copy.py"), "print('hi')\n");
}

// Files larger than the archiver's read buffer are stored whole and deduplicated.
TEST_F(SnapshotTest, LargeFilesAreArchivedInPiecesAndDeduplicated) {
  std::string big;
  for (int i = 0; big.size() < (3u << 20) + 123; ++i) big += std::to_string(i) + "\n";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(root_ + "/weights.bin", big).ok());
  Layout layout(home_.path());
  auto first = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->new_blobs, 0u);
  std::string dest = home_.path() + "/big_node";
  ASSERT_TRUE(MaterializeSnapshot(layout, *first, dest, DefaultEnv()).ok());
  EXPECT_TRUE(*DefaultEnv()->ReadFile(dest + "/weights.bin") == big);
}

TEST_F(SnapshotTest, GitRevisionIsArchivedInsteadOfTheWorkingTree) {
  auto git = [&](std::vector<std::string> args) {
    SubprocessOptions options;
    options.argv = {"git", "-C", root_};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env_overrides = {{"GIT_AUTHOR_NAME", "t"},
                             {"GIT_AUTHOR_EMAIL", "t@example.com"},
                             {"GIT_COMMITTER_NAME", "t"},
                             {"GIT_COMMITTER_EMAIL", "t@example.com"}};
    auto ran = RunSubprocess(options);
    ASSERT_TRUE(ran.ok() && ran->succeeded()) << (ran.ok() ? ran->output : "");
  };
  git({"init", "-q", "-b", "main"});
  git({"add", "-A"});
  git({"commit", "-q", "-m", "first"});
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(root_ + "/train.py", "print('uncommitted')\n").ok());
  spec::SnapshotSpec snapshot;
  snapshot.root_path = root_;
  snapshot.resolved_root = root_;
  snapshot.git = spec::GitRefSpec{std::string("main"), std::nullopt};
  auto listing = spec::ScanSnapshot(snapshot, DefaultEnv());
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  Layout layout(home_.path());
  auto archived = ArchiveSnapshot(layout, *listing, DefaultEnv());
  ASSERT_TRUE(archived.ok()) << archived.status().ToString();
  EXPECT_EQ(archived->revision.size(), 40u);
  std::string dest = home_.path() + "/git_node";
  ASSERT_TRUE(MaterializeSnapshot(layout, *archived, dest, DefaultEnv()).ok());
  EXPECT_EQ(*DefaultEnv()->ReadFile(dest + "/train.py"), "print('hi')\n");
  EXPECT_EQ(*DefaultEnv()->ReadFile(dest + "/run.sh"), "#!/bin/sh\necho run\n");
  struct stat st;
  ASSERT_EQ(::stat((dest + "/run.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0500u);
}

// A blob damaged in place keeps its size: it is found by its hash, at materialize and at the
// next archive (which rewrites it).
TEST_F(SnapshotTest, DamagedBlobOfTheSameSizeIsFoundByItsHash) {
  Layout layout(home_.path());
  auto snapshot = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(snapshot.ok());
  std::string blob;
  for (const auto& e : snapshot->entries) {
    if (e.path == "pkg/util.py") blob = layout.CasPath(e.digest);
  }
  ASSERT_EQ(::chmod(blob.c_str(), 0644), 0);
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(blob, "X = 9\n").ok());  // same length
  Status broken = MaterializeSnapshot(layout, *snapshot, home_.path() + "/n", DefaultEnv());
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.code(), ErrorCode::kDataLoss);
  EXPECT_NE(broken.message().find("pkg/util.py"), std::string::npos) << broken.message();
  auto again = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->new_blobs, 1u);
  ASSERT_TRUE(MaterializeSnapshot(layout, *snapshot, home_.path() + "/n", DefaultEnv()).ok());
  EXPECT_EQ(*DefaultEnv()->ReadFile(home_.path() + "/n/pkg/util.py"), "X = 1\n");
}

TEST_F(SnapshotTest, LinksOutsideTheRootAreRefusedAndAbsoluteInsideOnesMadeRelative) {
  ASSERT_EQ(::symlink((root_ + "/pkg/util.py").c_str(), (root_ + "/abs_inside.py").c_str()), 0);
  ASSERT_EQ(::symlink("../train.py", (root_ + "/pkg/up.py").c_str()), 0);
  Layout layout(home_.path());
  auto archived = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(archived.ok()) << archived.status().ToString();
  std::string dest = home_.path() + "/node";
  ASSERT_TRUE(MaterializeSnapshot(layout, *archived, dest, DefaultEnv()).ok());
  char target[256] = {};
  ASSERT_GT(::readlink((dest + "/abs_inside.py").c_str(), target, sizeof(target) - 1), 0);
  EXPECT_STREQ(target, "pkg/util.py");
  EXPECT_EQ(*DefaultEnv()->ReadFile(dest + "/pkg/up.py"), "print('hi')\n");

  for (const char* escaping : {"/etc/passwd", "../../outside", "pkg/../../x"}) {
    std::string link = root_ + "/escape";
    ::unlink(link.c_str());
    ASSERT_EQ(::symlink(escaping, link.c_str()), 0);
    auto refused = ArchiveSnapshot(layout, Scan(), DefaultEnv());
    ASSERT_FALSE(refused.ok()) << escaping;
    EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("the symbolic link escape points at " +
                                              std::string(escaping) + ", outside root_path"),
              std::string::npos)
        << refused.status().message();
  }
}

TEST_F(SnapshotTest, FileNamesThatAreNotUtf8RoundTrip) {
  const std::string name = "caf\xe9 \xff.txt";
  ASSERT_TRUE(DefaultEnv()->WriteFileAtomic(root_ + "/" + name, "latin-1 name\n").ok());
  ASSERT_EQ(::symlink(name.c_str(), (root_ + "/to_latin1").c_str()), 0);
  Layout layout(home_.path());
  auto archived = ArchiveSnapshot(layout, Scan(), DefaultEnv());
  ASSERT_TRUE(archived.ok()) << archived.status().ToString();
  auto loaded = LoadSnapshot(layout, archived->id, DefaultEnv());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  std::string dest = home_.path() + "/node";
  ASSERT_TRUE(MaterializeSnapshot(layout, *loaded, dest, DefaultEnv()).ok());
  EXPECT_EQ(*DefaultEnv()->ReadFile(dest + "/" + name), "latin-1 name\n");
  EXPECT_EQ(*DefaultEnv()->ReadFile(dest + "/to_latin1"), "latin-1 name\n");
}

}  // namespace
}  // namespace air::runtime
