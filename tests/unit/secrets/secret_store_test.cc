// Tests for SecretStore: round trips, listing, deletes, file modes, no-op reads, and
// concurrent writers in threads and processes.
#include "secrets/secret_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "secrets/names.h"
#include "test_util.h"

namespace air::secrets {
namespace {

using testing::FileMode;
using testing::ReadBytes;
using testing::TempHome;

std::string AllBytesButNul() {
  std::string v;
  for (int b = 1; b < 256; ++b) v.push_back(static_cast<char>(b));
  return v;
}

TEST(SecretStoreTest, PutGetRoundTripKeepsEveryByte) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  ASSERT_TRUE(store.CreateScope("my_scope").ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plain", "hf_abcdefghijklmnop"},
      {"trailing_newline", "token\n"},
      {"crlf", "line1\r\nline2\r\n"},
      {"multi_line", "-----BEGIN KEY-----\nAAAA\nBBBB\n-----END KEY-----"},
      {"utf8", "p\xc3\xa4ss \xf0\x9f\x94\x91"},
      {"invalid_utf8", "\xff\xfe\x80 raw"},
      {"all_bytes", AllBytesButNul()},
      {"max_size", std::string(kMaxValueBytes, 'z')},
      {"spaces", "  padded  "},
  };
  for (const auto& [key, value] : cases) {
    auto put = store.PutSecret("my_scope", key, value);
    ASSERT_TRUE(put.ok()) << key << ": " << put.status().ToString();
    EXPECT_FALSE(put->replaced);
    EXPECT_EQ(put->bytes, value.size());
  }
  for (const auto& [key, value] : cases) {
    auto got = store.GetSecret("my_scope", key);
    ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString();
    EXPECT_EQ(*got, value) << key;
  }
  // Nothing of a value appears in the files at rest.
  std::string at_rest = ReadBytes(store.store_path()) + ReadBytes(store.key_path());
  for (const auto& [key, value] : cases) {
    if (value.size() >= 8) {
      EXPECT_EQ(at_rest.find(value.substr(0, 8)), std::string::npos) << key;
    }
  }
}

TEST(SecretStoreTest, ReplaceListAndDelete) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  ASSERT_TRUE(store.CreateScope("zeta").ok());
  ASSERT_TRUE(store.CreateScope("alpha").ok());
  ASSERT_TRUE(store.PutSecret("alpha", "b_key", "value-one").ok());
  ASSERT_TRUE(store.PutSecret("alpha", "a_key", "value-two").ok());
  auto replaced = store.PutSecret("alpha", "b_key", "value-three");
  ASSERT_TRUE(replaced.ok());
  EXPECT_TRUE(replaced->replaced);
  EXPECT_EQ(*store.GetSecret("alpha", "b_key"), "value-three");

  auto scopes = store.ListScopes();
  ASSERT_TRUE(scopes.ok());
  ASSERT_EQ(scopes->size(), 2u);
  EXPECT_EQ((*scopes)[0].name, "alpha");
  EXPECT_EQ((*scopes)[0].secret_count, 2u);
  EXPECT_GT((*scopes)[0].created_us, 0);
  EXPECT_EQ((*scopes)[1].name, "zeta");

  auto secrets = store.ListSecrets("alpha");
  ASSERT_TRUE(secrets.ok());
  ASSERT_EQ(secrets->size(), 2u);
  EXPECT_EQ((*secrets)[0].key, "a_key");
  EXPECT_EQ((*secrets)[1].key, "b_key");
  EXPECT_GE((*secrets)[1].updated_us, (*secrets)[0].updated_us);

  ASSERT_TRUE(store.DeleteSecret("alpha", "a_key").ok());
  Status again = store.DeleteSecret("alpha", "a_key");
  EXPECT_EQ(again.code(), ErrorCode::kNotFound);
  EXPECT_NE(again.message().find("secret alpha/a_key does not exist"), std::string::npos)
      << again.message();
  EXPECT_NE(again.message().find("its keys are: b_key"), std::string::npos);

  ASSERT_TRUE(store.DeleteScope("alpha").ok());
  EXPECT_EQ(store.GetSecret("alpha", "b_key").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store.ListScopes()->size(), 1u);
}

TEST(SecretStoreTest, ErrorsNameWhatIsWrongAndHowToFixIt) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  ASSERT_TRUE(store.CreateScope("my_scope").ok());
  Status dup = store.CreateScope("my_scope");
  EXPECT_EQ(dup.code(), ErrorCode::kAlreadyExists);
  EXPECT_NE(dup.message().find("'my_scope' already exists"), std::string::npos);

  auto no_scope = store.PutSecret("my_scop", "k", "value");
  EXPECT_EQ(no_scope.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(no_scope.status().message().find("secret scope 'my_scop' does not exist (did you "
                                             "mean 'my_scope'?)"),
            std::string::npos)
      << no_scope.status().message();
  EXPECT_NE(no_scope.status().message().find("air secrets create-scope my_scop"),
            std::string::npos);

  EXPECT_EQ(store.PutSecret("my_scope", "bad key", "v").status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store.PutSecret("my_scope", "k", "").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store.PutSecret("my_scope", "k", std::string(kMaxValueBytes + 1, 'x')).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store.DeleteScope("nope").code(), ErrorCode::kNotFound);
  EXPECT_EQ(store.ListSecrets("nope").status().code(), ErrorCode::kNotFound);
  // A rejected put leaves the earlier state untouched.
  EXPECT_TRUE(store.ListSecrets("my_scope")->empty());
}

TEST(SecretStoreTest, ReadsOfAFreshHomeCreateNothingAndFailedFirstWritesCreateNoKey) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  EXPECT_TRUE(store.ListScopes()->empty());
  EXPECT_EQ(store.GetSecret("s", "k").status().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(DefaultEnv()->FileExists(home.path()));

  EXPECT_EQ(store.DeleteScope("missing").code(), ErrorCode::kNotFound);
  EXPECT_FALSE(DefaultEnv()->FileExists(store.key_path()));
  EXPECT_FALSE(DefaultEnv()->FileExists(store.store_path()));
}

TEST(SecretStoreTest, FilesStay0600AndTheDirectory0700AcrossPutDeleteCycles) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  mode_t old_umask = ::umask(0);  // the most permissive umask must not widen anything
  ASSERT_TRUE(store.CreateScope("s").ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store.PutSecret("s", "k" + std::to_string(i), "value-" + std::to_string(i)).ok());
    ASSERT_TRUE(store.PutSecret("s", "k0", "rewritten-" + std::to_string(i)).ok());
    if (i % 2 == 1) {
      ASSERT_TRUE(store.DeleteSecret("s", "k" + std::to_string(i)).ok());
    }
    for (const auto& path : {store.key_path(), store.store_path(), store.lock_path()}) {
      EXPECT_EQ(FileMode(path), 0600) << path << " after cycle " << i;
    }
    EXPECT_EQ(FileMode(store.dir()), 0700);
  }
  ASSERT_TRUE(store.DeleteScope("s").ok());
  ::umask(old_umask);
  EXPECT_EQ(FileMode(store.store_path()), 0600);
  EXPECT_EQ(FileMode(store.dir() + "/.gitignore"), 0600);
  // Only these files: no temporary file is left behind.
  auto entries = DefaultEnv()->ListDir(store.dir());
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(*entries, (std::vector<std::string>{".gitignore", "key", "lock", "store"}));
}

// A code snapshot of a project that holds AIR_HOME honours .gitignore files: the secrets
// directory must ignore everything in it (tests/python/test_secrets_run.py runs the snapshot).
TEST(SecretStoreTest, TheSecretsDirectoryIgnoresItselfForSnapshotsAndGit) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  ASSERT_TRUE(store.CreateScope("s").ok());
  auto ignore = DefaultEnv()->ReadFile(store.dir() + "/.gitignore");
  ASSERT_TRUE(ignore.ok()) << ignore.status().ToString();
  EXPECT_NE(ignore->find("\n*\n"), std::string::npos) << *ignore;
  // Restored when removed, by the next write.
  ASSERT_EQ(::unlink((store.dir() + "/.gitignore").c_str()), 0);
  ASSERT_TRUE(store.PutSecret("s", "k", "value-1").ok());
  EXPECT_TRUE(DefaultEnv()->FileExists(store.dir() + "/.gitignore"));
}

TEST(SecretStoreTest, AWideSecretsDirectoryIsTightenedTo0700) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  ASSERT_TRUE(DefaultEnv()->CreateDirs(store.dir(), 0755).ok());
  ASSERT_EQ(::chmod(store.dir().c_str(), 0755), 0);
  ASSERT_TRUE(store.CreateScope("s").ok());
  EXPECT_EQ(FileMode(store.dir()), 0700);
}

TEST(SecretStoreTest, ConcurrentWritersInThreadsLoseNoUpdate) {
  TempHome home;
  ASSERT_TRUE(SecretStore(DefaultEnv(), home.path()).CreateScope("s").ok());
  constexpr int kThreads = 4;
  constexpr int kPutsEach = 10;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&home, t] {
      SecretStore store(DefaultEnv(), home.path());  // each its own object and lock fd
      for (int i = 0; i < kPutsEach; ++i) {
        std::string key = "t" + std::to_string(t) + "_" + std::to_string(i);
        EXPECT_TRUE(store.PutSecret("s", key, "value of " + key).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  SecretStore store(DefaultEnv(), home.path());
  auto listed = store.ListSecrets("s");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), static_cast<size_t>(kThreads * kPutsEach));
  EXPECT_EQ(*store.GetSecret("s", "t3_9"), "value of t3_9");
}

TEST(SecretStoreTest, ConcurrentWriterProcessesLoseNoUpdate) {
  TempHome home;
  ASSERT_TRUE(SecretStore(DefaultEnv(), home.path()).CreateScope("s").ok());
  constexpr int kProcesses = 4;
  constexpr int kPutsEach = 8;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      SecretStore store(DefaultEnv(), home.path());
      int failures = 0;
      for (int i = 0; i < kPutsEach; ++i) {
        std::string key = "p" + std::to_string(p) + "_" + std::to_string(i);
        if (!store.PutSecret("s", key, "value of " + key).ok()) ++failures;
      }
      ::_exit(failures == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  SecretStore store(DefaultEnv(), home.path());
  EXPECT_EQ(store.ListSecrets("s")->size(), static_cast<size_t>(kProcesses * kPutsEach));
  EXPECT_EQ(*store.GetSecret("s", "p2_7"), "value of p2_7");
}

TEST(SecretStoreTest, EachPutUsesAFreshNonce) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  ASSERT_TRUE(store.CreateScope("s").ok());
  ASSERT_TRUE(store.PutSecret("s", "a", "same value").ok());
  ASSERT_TRUE(store.PutSecret("s", "b", "same value").ok());
  auto snapshot = store.Read();
  ASSERT_TRUE(snapshot.ok());
  const auto& secrets = snapshot->contents().FindScope("s")->secrets;
  ASSERT_EQ(secrets.size(), 2u);
  EXPECT_NE(secrets[0].nonce, secrets[1].nonce);
  EXPECT_NE(secrets[0].box, secrets[1].box);
  auto before = secrets[0].nonce;
  ASSERT_TRUE(store.PutSecret("s", "a", "same value").ok());
  EXPECT_NE(store.Read()->contents().FindScope("s")->secrets[0].nonce, before);
}

}  // namespace
}  // namespace air::secrets
