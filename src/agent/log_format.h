// The node log format (docs/run-directory.md): one record per line,
//
//   2026-11-30T12:34:56.789012Z out <text>
//   2026-11-30T12:34:56.790001Z err <text>
//   2026-11-30T12:34:57.000000Z air <a message from air itself>
//
// a UTC timestamp with microseconds, the stream, one space, then the line as the worker wrote
// it without its newline. LogLineWriter turns raw output chunks into such records; ParseLogLine
// reads them back for `air logs`.
// Thread safety: LogLineWriter is used by one thread; ParseLogLine is pure.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "agent/output_filter.h"
#include "base/env.h"
#include "base/status.h"

namespace air::agent {

// "2026-11-30T12:34:56.789012Z" for a wall-clock time in microseconds.
std::string FormatLogTimestamp(int64_t micros);

struct LogRecord {
  std::string timestamp;
  std::string stream;  // "out", "err" or "air"
  std::string text;
};

// nullopt when `line` is not a record (then callers show it raw).
std::optional<LogRecord> ParseLogLine(std::string_view line);

// Size cap of a node log (docs/run-directory.md): past max_bytes the log is renamed to
// PATH.1 (PATH.1 to PATH.2, ... up to PATH.<keep>; the oldest part is dropped) and a new PATH is
// started, so one node's log never takes more than about (keep + 1) * max_bytes.
struct LogRotation {
  std::string path;        // the log the descriptor writes to
  uint64_t max_bytes = 0;  // 0: no cap
  int keep = 2;            // rotated parts kept
};

// Appends records to one log file descriptor (not owned; with rotation it is re-pointed at the
// new file with dup2). Each record is written with a single write(2) to an O_APPEND descriptor,
// so records from several writers never interleave.
class LogLineWriter {
 public:
  LogLineWriter(int fd, Env* env, LogRotation rotation = {});

  // One stream's state: its filter and its unfinished last line.
  struct Stream {
    std::string name;
    std::unique_ptr<OutputFilter> filter;
    std::string partial;
  };

  // Filters `chunk` and writes every complete line. A partial line longer than
  // kMaxLineBytes is written as a record of its own. Output that only extends an unfinished
  // line (a progress bar redrawn with '\r') bumps the log's mtime, at most once a second, so
  // that hang detection (runtime/hang_watch.h) sees the node is alive.
  Status Write(Stream& stream, std::string_view chunk);
  // Flushes the filter and writes the unfinished last line, if any.
  Status Finish(Stream& stream);
  // One record on the "air" stream.
  Status Note(std::string_view message);

  // Called with each output record ("out"/"err", after the filter), once it is written, and its
  // time: how the agent's AlertScanner sees the lines.
  using LineObserver =
      std::function<void(std::string_view stream, std::string_view text, int64_t time_us)>;
  void set_line_observer(LineObserver observer) { observer_ = std::move(observer); }

  static constexpr size_t kMaxLineBytes = 64 * 1024;

 private:
  Status Emit(const std::string& stream, std::string_view text);
  Status Split(Stream& stream, std::string_view filtered);
  Status Rotate();

  int fd_;
  Env* env_;
  LogRotation rotation_;
  uint64_t written_ = 0;       // bytes in the current file
  int64_t next_touch_us_ = 0;  // monotonic: when an unfinished line may bump the mtime again
  LineObserver observer_;
};

}  // namespace air::agent
