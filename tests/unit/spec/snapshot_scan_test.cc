// Code snapshot listing on real directories and real git repositories.
#include "spec/snapshot_scan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "base/subprocess.h"
#include "spec/git_tree.h"
#include "spec_test_util.h"

namespace air::spec {
namespace {

using testing::TempDir;

std::vector<std::string> Paths(const SnapshotListing& listing) {
  std::vector<std::string> out;
  for (const auto& f : listing.files) out.push_back(f.path);
  return out;
}

const SnapshotFile* FindFile(const SnapshotListing& listing, const std::string& path) {
  for (const auto& f : listing.files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

void Git(const std::string& dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {
      "git", "-C", dir, "-c", "user.name=air", "-c", "user.email=air@example.com"};
  argv.insert(argv.end(), args.begin(), args.end());
  SubprocessOptions git;
  git.argv = std::move(argv);
  Result<SubprocessResult> ran = RunSubprocess(git);
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  ASSERT_TRUE(ran->succeeded()) << ran->output;
}

SnapshotSpec Snapshot(const std::string& root) {
  SnapshotSpec s;
  s.root_path = root;
  s.resolved_root = root;
  return s;
}

TEST(SnapshotScan, WorkingTreeHonorsGitignoreAndSkipsDotGit) {
  TempDir dir;
  dir.Write("train.py", "print(1)\n", 0755);
  dir.Write("README.md", "hello");
  dir.Write(".gitignore", "*.log\n/outputs/\n__pycache__/\n!keep.log\n");
  dir.Write("run.log", "noise");
  dir.Write("keep.log", "kept");
  dir.Write("outputs/ckpt.bin", std::string(1000, 'x'));
  dir.Write("src/outputs/data.txt", "not anchored here");
  dir.Write("src/__pycache__/m.pyc", "x");
  dir.Write("src/model.py", "class M: pass\n");
  dir.Write("src/.gitignore", "*.tmp\n");
  dir.Write("src/scratch.tmp", "x");
  dir.Write("scratch.tmp", "root tmp is kept");
  dir.Write(".git/HEAD", "ref: refs/heads/main\n");
  ASSERT_EQ(::symlink("train.py", (dir.path() + "/link.py").c_str()), 0);

  Result<SnapshotListing> listing = ScanSnapshot(Snapshot(dir.path()), DefaultEnv());
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_EQ(Paths(*listing),
            (std::vector<std::string>{".gitignore", "README.md", "keep.log", "link.py",
                                      "scratch.tmp", "src/.gitignore", "src/model.py",
                                      "src/outputs/data.txt", "train.py"}));
  const SnapshotFile* train = FindFile(*listing, "train.py");
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->size, 9u);
  EXPECT_EQ(train->mode, 0755u);
  const SnapshotFile* link = FindFile(*listing, "link.py");
  ASSERT_NE(link, nullptr);
  EXPECT_TRUE(link->is_symlink);
  EXPECT_EQ(link->size, 8u);  // length of "train.py"
  uint64_t total = 0;
  for (const auto& f : listing->files) total += f.size;
  EXPECT_EQ(listing->total_bytes, total);
  // run.log, outputs/, src/__pycache__/ and src/scratch.tmp
  EXPECT_EQ(listing->ignored_entries, 4u);
}

// A project folder as people have it: a virtualenv (whose bin/python links outside the tree)
// and bytecode caches, neither in a .gitignore: neither travels.
TEST(SnapshotScan, VirtualenvsAndPycacheNeverTravel) {
  TempDir dir;
  dir.Write("train.py", "print(1)\n");
  dir.Write(".venv/pyvenv.cfg", "home = /usr/bin\n");
  dir.Write(".venv/lib/python3.11/site-packages/big.py", std::string(4096, 'x'));
  ASSERT_EQ(::symlink("/usr/bin/python3", (dir.path() + "/.venv/python").c_str()), 0);
  dir.Write("tools/env/pyvenv.cfg", "home = /usr/bin\n");
  dir.Write("tools/env/bin/activate", "x");
  dir.Write("tools/run.py", "r");
  dir.Write("__pycache__/train.cpython-311.pyc", "c");
  dir.Write("tools/__pycache__/run.cpython-311.pyc", "c");
  dir.Write("venv-like/readme.txt", "a folder named like one, without pyvenv.cfg, travels");
  Result<SnapshotListing> listing = ScanSnapshot(Snapshot(dir.path()), DefaultEnv());
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_EQ(Paths(*listing),
            (std::vector<std::string>{"tools/run.py", "train.py", "venv-like/readme.txt"}));
  EXPECT_EQ(listing->skipped_dirs,
            (std::vector<std::string>{".venv", "__pycache__", "tools/__pycache__", "tools/env"}));
}

TEST(SnapshotScan, OverTheSizeLimitNamesTheLargestEntries) {
  TempDir dir;
  dir.Write("train.py", "print(1)\n");
  dir.Write("data/shard-0.bin", std::string(700 << 10, 'a'));
  dir.Write("data/shard-1.bin", std::string(600 << 10, 'b'));
  dir.Write("weights.bin", std::string(200 << 10, 'c'));
  SnapshotSpec spec = Snapshot(dir.path());
  spec.max_size_mb = 1;
  std::string field;
  Result<SnapshotListing> listing = ScanSnapshot(spec, DefaultEnv(), &field);
  ASSERT_FALSE(listing.ok());
  EXPECT_EQ(listing.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(field, "code_source.snapshot.max_size_mb");
  const std::string m = listing.status().message();
  EXPECT_NE(m.find("over its limit of 1.0 MiB (max_size_mb 1)"), std::string::npos) << m;
  EXPECT_NE(m.find("the largest entries: data/ 1.3 MiB, weights.bin 200.0 KiB, train.py"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("largest files: data/shard-0.bin 700.0 KiB, data/shard-1.bin 600.0 KiB"),
            std::string::npos)
      << m;
  spec.include_paths = {"train.py", "weights.bin"};  // what the error suggests
  EXPECT_TRUE(ScanSnapshot(spec, DefaultEnv()).ok());
}

TEST(SnapshotScan, AirHomeBelowTheRootIsNeverSnapshotted) {
  TempDir dir;
  dir.Write("train.py", "print(1)\n");
  dir.Write(".air/air.db", "sqlite");
  dir.Write(".air/secrets/key", "k");
  // Named through a different spelling of the same directory: excluded by identity.
  Result<SnapshotListing> listing =
      ScanSnapshot(Snapshot(dir.path()), DefaultEnv(), nullptr, dir.path() + "/./.air");
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_EQ(Paths(*listing), std::vector<std::string>({"train.py"}));
  // Without it, the same tree lists air's files (so the test above can fail).
  Result<SnapshotListing> all = ScanSnapshot(Snapshot(dir.path()), DefaultEnv());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->files.size(), 3u);
}

TEST(SnapshotScan, IncludePathsLimitTheListing) {
  TempDir dir;
  dir.Write("src/a.py", "a");
  dir.Write("src/sub/b.py", "bb");
  dir.Write("configs/x.yaml", "x: 1");
  dir.Write("data/big.bin", "zzzz");
  SnapshotSpec spec = Snapshot(dir.path());
  spec.include_paths = {"src", "configs/x.yaml"};
  Result<SnapshotListing> listing = ScanSnapshot(spec, DefaultEnv());
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_EQ(Paths(*listing),
            (std::vector<std::string>{"configs/x.yaml", "src/a.py", "src/sub/b.py"}));
  EXPECT_EQ(listing->total_bytes, 7u);
}

TEST(SnapshotScan, MissingIncludePathNamesTheField) {
  TempDir dir;
  dir.Write("src/a.py", "a");
  SnapshotSpec spec = Snapshot(dir.path());
  spec.include_paths = {"src", "nope"};
  std::string field;
  Result<SnapshotListing> listing = ScanSnapshot(spec, DefaultEnv(), &field);
  ASSERT_FALSE(listing.ok());
  EXPECT_EQ(listing.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(field, "code_source.snapshot.include_paths[1]");
  EXPECT_NE(listing.status().message().find("'nope' does not exist"), std::string::npos);
}

TEST(SnapshotScan, IncludePathWithoutFilesIsAnError) {
  TempDir dir;
  dir.Write("src/a.py", "a");
  dir.Write("logs/run.log", "x");
  dir.Write(".gitignore", "*.log\n");
  std::filesystem::create_directories(dir.path() + "/empty");
  for (const char* path : {"empty", "logs"}) {
    SnapshotSpec spec = Snapshot(dir.path());
    spec.include_paths = {"src", path};
    std::string field;
    Result<SnapshotListing> listing = ScanSnapshot(spec, DefaultEnv(), &field);
    ASSERT_FALSE(listing.ok()) << path;
    EXPECT_EQ(listing.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(field, "code_source.snapshot.include_paths[1]");
    EXPECT_NE(listing.status().message().find(std::string("'") + path + "' has no files"),
              std::string::npos)
        << listing.status().message();
  }
}

TEST(SnapshotScan, ContainedPathsAndLinkTargets) {
  EXPECT_TRUE(IsContainedRelativePath("a/b.py"));
  for (const char* bad : {"", "/a", "../a", "a/../b", "a//b", "./a", "a/."}) {
    EXPECT_FALSE(IsContainedRelativePath(bad)) << bad;
  }
  EXPECT_EQ(*ContainedLinkTarget("pkg/l", "../a.py", "/r"), "../a.py");
  EXPECT_EQ(*ContainedLinkTarget("pkg/sub/l", "/r/pkg/x/y.py", "/r"), "../x/y.py");
  EXPECT_EQ(*ContainedLinkTarget("l", "/r/a.py", "/r/"), "a.py");
  EXPECT_FALSE(ContainedLinkTarget("pkg/l", "../../a.py", "/r").ok());
  EXPECT_FALSE(ContainedLinkTarget("l", "/rx/a.py", "/r").ok());
  EXPECT_FALSE(ContainedLinkTarget("l", "/etc/passwd", "/r").ok());
}

class GitSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Git(dir_.path(), {"init", "-q", "-b", "main"});
    dir_.Write("train.py", "v1\n", 0755);
    dir_.Write("pkg/util.py", "u\n");
    dir_.Write("pkg/deep/x.txt", "x\n");
    dir_.Write(".gitignore", "*.log\n");
    Git(dir_.path(), {"add", "-A"});
    Git(dir_.path(), {"commit", "-q", "-m", "first"});
    Git(dir_.path(), {"branch", "release"});
    // Working-tree changes after the commit must not show up in a git snapshot.
    dir_.Write("train.py", "version two, longer\n");
    dir_.Write("untracked.py", "new");
  }
  TempDir dir_;
};

TEST_F(GitSnapshotTest, ListsTheCommittedTreeOfABranch) {
  SnapshotSpec spec = Snapshot(dir_.path());
  spec.git = GitRefSpec{"release", std::nullopt};
  Result<SnapshotListing> listing = ScanSnapshot(spec, DefaultEnv());
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_EQ(Paths(*listing),
            (std::vector<std::string>{".gitignore", "pkg/deep/x.txt", "pkg/util.py", "train.py"}));
  EXPECT_EQ(FindFile(*listing, "train.py")->size, 3u);
  EXPECT_EQ(FindFile(*listing, "train.py")->mode, 0755u);
  EXPECT_EQ(listing->revision.size(), 40u);
}

TEST_F(GitSnapshotTest, CommitAndSubdirectoryRootAndIncludePaths) {
  SnapshotSpec head = Snapshot(dir_.path());
  head.git = GitRefSpec{"main", std::nullopt};
  Result<SnapshotListing> at_main = ScanSnapshot(head, DefaultEnv());
  ASSERT_TRUE(at_main.ok());
  SnapshotSpec spec = Snapshot(dir_.path() + "/pkg");
  spec.git = GitRefSpec{std::nullopt, at_main->revision.substr(0, 10)};
  spec.include_paths = {"deep"};
  Result<SnapshotListing> listing = ScanSnapshot(spec, DefaultEnv());
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_EQ(Paths(*listing), (std::vector<std::string>{"deep/x.txt"}));
  EXPECT_EQ(listing->revision, at_main->revision);
}

TEST_F(GitSnapshotTest, UnknownBranchSuggestsTheClosest) {
  SnapshotSpec spec = Snapshot(dir_.path());
  spec.git = GitRefSpec{"mian", std::nullopt};
  std::string field;
  Result<SnapshotListing> listing = ScanSnapshot(spec, DefaultEnv(), &field);
  ASSERT_FALSE(listing.ok());
  EXPECT_EQ(listing.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(field, "code_source.snapshot.git.branch");
  EXPECT_NE(listing.status().message().find("no branch 'mian'"), std::string::npos);
  EXPECT_NE(listing.status().message().find("did you mean 'main'?"), std::string::npos)
      << listing.status().message();
}

TEST_F(GitSnapshotTest, UnknownCommitIsAClearError) {
  SnapshotSpec spec = Snapshot(dir_.path());
  spec.git = GitRefSpec{std::nullopt, "deadbeefdeadbeef"};
  std::string field;
  Result<SnapshotListing> listing = ScanSnapshot(spec, DefaultEnv(), &field);
  ASSERT_FALSE(listing.ok());
  EXPECT_EQ(field, "code_source.snapshot.git.commit");
  EXPECT_NE(listing.status().message().find("no commit 'deadbeefdeadbeef'"), std::string::npos);
}

TEST(SnapshotScan, GitOutsideARepositoryIsAClearError) {
  TempDir dir;
  dir.Write("a.py", "a");
  SnapshotSpec spec = Snapshot(dir.path());
  spec.git = GitRefSpec{"main", std::nullopt};
  Result<SnapshotListing> listing = ScanSnapshot(spec, DefaultEnv());
  ASSERT_FALSE(listing.ok());
  EXPECT_NE(listing.status().message().find("is not inside a git repository"), std::string::npos)
      << listing.status().message();
}

// git accepts trees holding ".." (git mktree); such a path must not reach the snapshot.
TEST_F(GitSnapshotTest, TreePathsWithDotDotAreRefused) {
  std::string blob = dir_.path() + "/blob.txt";
  dir_.Write("blob.txt", "evil\n");
  SubprocessOptions hash;
  hash.argv = {"git", "-C", dir_.path(), "hash-object", "-w", blob};
  Result<SubprocessResult> hashed = RunSubprocess(hash);
  ASSERT_TRUE(hashed.ok() && hashed->succeeded());
  std::string oid = hashed->output.substr(0, 40);
  dir_.Write("inner.txt", "100644 blob " + oid + "\tevil\n");
  std::string script = "cd '" + dir_.path() + "' && inner=$(git mktree < inner.txt) && " +
                       "printf '040000 tree %s\\t..\\n100644 blob " + oid +
                       "\\tok\\n' $inner | git mktree > outer.txt && "
                       "git -c user.name=a -c user.email=a@b commit-tree $(cat outer.txt) -m x "
                       "> commit.txt && git update-ref refs/heads/evil $(cat commit.txt)";
  SubprocessOptions sh;
  sh.argv = {"sh", "-c", script};
  Result<SubprocessResult> made = RunSubprocess(sh);
  ASSERT_TRUE(made.ok() && made->succeeded()) << (made.ok() ? made->output : "");
  SnapshotSpec spec = Snapshot(dir_.path());
  spec.git = GitRefSpec{"evil", std::nullopt};
  Result<SnapshotListing> listing = ScanSnapshot(spec, DefaultEnv());
  ASSERT_FALSE(listing.ok());
  EXPECT_EQ(listing.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(listing.status().message().find("'../evil'"), std::string::npos)
      << listing.status().message();
}

}  // namespace
}  // namespace air::spec
