// Helpers shared by the secrets unit tests: a temporary AIR_HOME that is removed afterwards,
// and small file utilities (mode, raw bytes).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "base/env.h"

namespace air::secrets::testing {

class TempHome {
 public:
  TempHome() {
    char tmpl[] = "/tmp/air_secrets_test_XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    EXPECT_NE(dir, nullptr);
    path_ = std::string(dir) + "/home";
  }
  ~TempHome() { (void)DefaultEnv()->RemoveAll(path_.substr(0, path_.rfind('/'))); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline int FileMode(const std::string& path) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) return -1;
  return static_cast<int>(sb.st_mode & 0777);
}

inline std::string ReadBytes(const std::string& path) {
  auto r = DefaultEnv()->ReadFile(path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::string();
}

// Overwrites `path` in place (keeping its inode and mode), as an attacker or a bad disk would.
inline void OverwriteInPlace(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(bytes.size())), 0);
}

}  // namespace air::secrets::testing
