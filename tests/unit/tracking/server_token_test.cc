// Tests for the tracking server's token file (server_files.h): created 0600 in a private
// tracking directory, the same token for every caller, and no file ever named with any part of
// the token (every name the Env is asked to create is recorded at the seam).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "base/env_wrapper.h"
#include "tracking/server_files.h"

namespace air::tracking {
namespace {

// Records every file the code under test creates or renames into place.
class RecordingEnv : public EnvWrapper {
 public:
  RecordingEnv() : EnvWrapper(DefaultEnv()) {}
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, WriteMode how,
                                                        mode_t mode) override {
    names.push_back(path);
    return target()->NewWritableFile(path, how, mode);
  }
  Status RenameFileNoReplace(const std::string& from, const std::string& to) override {
    names.push_back(to);
    return target()->RenameFileNoReplace(from, to);
  }
  std::vector<std::string> names;
};

TEST(ServerTokenTest, IsPrivateAndNoFileIsNamedWithAnyPartOfIt) {
  char tmpl[] = "/tmp/air_server_token_test_XXXXXX";
  const std::string home = ::mkdtemp(tmpl);
  ServerFiles files(home);
  RecordingEnv env;
  auto token = ServerToken(files, &env);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  ASSERT_EQ(token->size(), 64u);
  ASSERT_FALSE(env.names.empty());
  // Any 8 hex digits of the token (what the old temporary name held) in a file's name.
  for (const std::string& path : env.names) {
    const std::string name = path.substr(path.rfind('/') + 1);
    for (size_t i = 0; i + 8 <= token->size(); ++i) {
      EXPECT_EQ(name.find(token->substr(i, 8)), std::string::npos)
          << name << " holds token bits " << token->substr(i, 8);
    }
  }
  struct stat sb {};
  ASSERT_EQ(::stat(files.TokenPath().c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(files.dir.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0700u);
  // Every later caller reads the same token.
  auto again = ServerToken(files, DefaultEnv());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *token);
}

}  // namespace
}  // namespace air::tracking
