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

// The repository root: $AIR_SOURCE_DIR (set by ctest), else found from this file's path
// (relative to the build directory when ccache's CCACHE_BASEDIR is in effect, so it only
// works from there) or from the test binary's location (<repo>/<build>/bin/...), so that the
// binary also runs by hand from any directory.
inline std::filesystem::path SourceDir() {
  if (const char* src = std::getenv("AIR_SOURCE_DIR")) return src;
  auto is_root = [](const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::is_directory(p / "tests" / "data" / "spec", ec);
  };
  std::filesystem::path from_file =
      std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "..";
  if (is_root(from_file)) return from_file;
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  for (std::filesystem::path p = exe.parent_path(); !ec && p != p.root_path();
       p = p.parent_path()) {
    if (is_root(p)) return p;
  }
  return from_file;
}

}  // namespace air::spec::testing
