// Reading node logs (agent/log_format.h records) for `air logs`, `air run --watch` and failure
// summaries: whole files, their last N lines, or new lines as a live log grows. Tails are read
// backwards from the end of the file in fixed-size blocks and a follower reads at most a block
// per call, so memory stays bounded by what is shown, not by the size of the log (a node that
// printed gigabytes). A line longer than kMaxLogLineBytes is cut to its first kMaxLogLineBytes
// bytes plus a note of how many were left out.
// Thread safety: LogFollower is used by one thread; the functions are stateless.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"

namespace air::runtime {

inline constexpr size_t kMaxLogLineBytes = 64 * 1024;

// Every line of the file (without newlines). kNotFound when it does not exist.
Result<std::vector<std::string>> ReadLogLines(Env* env, const std::string& path);

// The last `count` of `lines` (all when count <= 0).
std::vector<std::string> TailLines(std::vector<std::string> lines, int count);

// The files of one node log, newest first: `path`, then its rotated parts path.1, path.2, ...
// that exist (agent/log_format.h rotates a log past its size cap).
std::vector<std::string> LogParts(Env* env, const std::string& path);

// The last lines of a log and its rotated parts, oldest first, read backwards from the end:
// at most `max_lines` (0: no limit), and only the newest run of lines for which `keep` (when
// set) is true — reading stops at the first line from the end it rejects.
Result<std::vector<std::string>> ReadLastLines(
    Env* env, const std::string& path, size_t max_lines,
    const std::function<bool(const std::string&)>& keep = {});

// Incremental reader of a file that is still being appended to.
class LogFollower {
 public:
  explicit LogFollower(std::string path) : path_(std::move(path)) {}

  // Starts at the last `count` lines of the file as it is now, instead of its beginning.
  Status StartAtLastLines(size_t count);

  // Complete lines appended since the last call, from at most kReadBlock bytes of the file (call
  // again while `more()`). A trailing line without its newline is held back until it is
  // complete, or returned when `final` is set (the writer is done). A missing file is no lines
  // yet.
  Result<std::vector<std::string>> ReadNew(bool final);
  // True when the last ReadNew stopped at its block limit before the end of the file.
  bool more() const { return more_; }
  const std::string& path() const { return path_; }

  static constexpr size_t kReadBlock = 1 << 20;

 private:
  std::string path_;
  uint64_t offset_ = 0;
  uint64_t inode_ = 0;  // of the file offset_ belongs to; another inode means it was rotated
  std::string partial_;
  uint64_t partial_dropped_ = 0;  // bytes of the held-back line cut at kMaxLogLineBytes
  bool more_ = false;
};

}  // namespace air::runtime
