// Reading node logs (agent/log_format.h records) for `air logs`, `air run --watch` and failure
// summaries: whole files, their last N lines, or new lines as a live log grows.
// Thread safety: LogFollower is used by one thread; the functions are stateless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"

namespace air::runtime {

// Every line of the file (without newlines). kNotFound when it does not exist.
Result<std::vector<std::string>> ReadLogLines(Env* env, const std::string& path);

// The last `count` of `lines` (all when count <= 0).
std::vector<std::string> TailLines(std::vector<std::string> lines, int count);

// Incremental reader of a file that is still being appended to.
class LogFollower {
 public:
  explicit LogFollower(std::string path) : path_(std::move(path)) {}

  // Complete lines appended since the last call. A trailing line without its newline is held
  // back until it is complete, or returned when `final` is set (the writer is done). A missing
  // file is no lines yet.
  Result<std::vector<std::string>> ReadNew(bool final);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::string partial_;
};

}  // namespace air::runtime
