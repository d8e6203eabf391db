// Env: the one seam between air and the operating system (leveldb's Env).
//
// Files, directories, the clock, environment variables and ports are reached through an Env so
// tests can inject faults (a full disk, a torn write, a frozen clock). PosixEnv is the real
// implementation; DefaultEnv() returns a process-wide stateless instance. Implementations must
// be safe to call from several threads.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace air {

class Env {
 public:
  virtual ~Env() = default;

  // --- files and directories ---
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  // Writes `data` to a temporary file created with `mode` beside `path`, fsyncs it, renames it
  // over `path` and fsyncs the directory: readers see the old or the new file, never a torn one.
  virtual Status WriteFileAtomic(const std::string& path, std::string_view data,
                                 mode_t mode = 0644) = 0;
  virtual Status AppendToFile(const std::string& path, std::string_view data) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  virtual bool IsDirectory(const std::string& path) = 0;
  // mkdir -p; existing directories are fine.
  virtual Status CreateDirs(const std::string& path, mode_t mode = 0755) = 0;
  // rm -rf; a missing path is fine.
  virtual Status RemoveAll(const std::string& path) = 0;
  // Names (not paths) of the entries of a directory, sorted, without "." and "..".
  virtual Result<std::vector<std::string>> ListDir(const std::string& path) = 0;
  virtual Result<uint64_t> FileSize(const std::string& path) = 0;

  // --- clock ---
  virtual int64_t NowMicros() = 0;        // wall clock, microseconds since the epoch
  virtual int64_t MonotonicMicros() = 0;  // for durations and deadlines
  virtual void SleepMicros(int64_t micros) = 0;

  // --- process environment ---
  virtual std::optional<std::string> GetEnv(const std::string& name) = 0;

  // --- network ---
  // A TCP port free on every local address when asked, chosen below the kernel's ephemeral
  // range so that no bind(0) or outgoing connection can take it before its user binds it.
  virtual Result<int> PickFreePort() = 0;
};

// The real, stateless POSIX implementation, shared by the process.
Env* DefaultEnv();

}  // namespace air
