// Helpers for the spec unit tests: a temporary directory removed at the end of the test, file
// writing, and the repository's source directory.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace air::spec::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "air_spec_test_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

  // Writes `content` to path()/rel, creating parent directories.
  std::string Write(const std::string& rel, const std::string& content, mode_t mode = 0644) const {
    std::filesystem::path p = std::filesystem::path(path_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    ::chmod(p.c_str(), mode);
    return p.string();
  }

 private:
  std::string path_;
};

inline std::filesystem::path SourceDir() {
  const char* src = std::getenv("AIR_SOURCE_DIR");
  if (src) return src;
  return std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "..";
}

}  // namespace air::spec::testing
