// Tests for the POSIX Env: atomic writes keep exact modes, directories, ports.
#include "base/env.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

namespace air {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/air_env_test_XXXXXX";
  return ::mkdtemp(tmpl);
}

TEST(PosixEnvTest, WriteFileAtomicKeepsModeAcrossRewrites) {
  Env* env = DefaultEnv();
  std::string dir = TempDir();
  std::string path = dir + "/secret";
  ASSERT_TRUE(env->WriteFileAtomic(path, "one", 0600).ok());
  ASSERT_TRUE(env->WriteFileAtomic(path, "two", 0600).ok());
  struct stat sb;
  ASSERT_EQ(::stat(path.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  EXPECT_EQ(*env->ReadFile(path), "two");
  // No temporary file is left behind.
  EXPECT_EQ(env->ListDir(dir)->size(), 1u);
  ASSERT_TRUE(env->RemoveAll(dir).ok());
}

TEST(PosixEnvTest, MissingFileIsNotFound) {
  auto r = DefaultEnv()->ReadFile("/nonexistent/air/file");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/air/file"), std::string::npos);
}

TEST(PosixEnvTest, CreateDirsIsIdempotent) {
  Env* env = DefaultEnv();
  std::string dir = TempDir() + "/a/b/c";
  ASSERT_TRUE(env->CreateDirs(dir).ok());
  ASSERT_TRUE(env->CreateDirs(dir).ok());
  EXPECT_TRUE(env->IsDirectory(dir));
}

TEST(PosixEnvTest, PickFreePortReturnsUsablePort) {
  auto port = DefaultEnv()->PickFreePort();
  ASSERT_TRUE(port.ok());
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);
}

// A bind-0 port comes from the ephemeral range, where any other socket's bind(0) or connect()
// can take it before the rendezvous store binds it; the picked port lies below that range.
TEST(PosixEnvTest, PickFreePortAvoidsTheEphemeralRange) {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  ASSERT_TRUE(in >> low >> high) << "cannot read ip_local_port_range";
  if (low - 10000 < 1024) GTEST_SKIP() << "ip_local_port_range starts at " << low << ": no room";
  for (int i = 0; i < 20; ++i) {
    auto port = DefaultEnv()->PickFreePort();
    ASSERT_TRUE(port.ok()) << port.status().message();
    EXPECT_LT(*port, low);
    EXPECT_GE(*port, low - 10000);
  }
}

}  // namespace
}  // namespace air
