// AtomicFileWriter: writes a large file piece by piece so that readers see either the old file
// or the complete new one (REFERENCES.md §6): data goes to "<path>.tmp.<pid>" beside the target,
// Commit() fsyncs it, renames it over the target and fsyncs the directory. Destroying a writer
// that was not committed removes the temporary file. Errors name the path; a full disk says so
// (and how many bytes were being written).
// Thread safety: one writer per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace air::engine {

class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Creates the temporary file (mode 0644).
  Status Open();
  Status Append(const void* data, size_t size);
  // fsync, rename over the target, fsync the directory.
  Status Commit();

  const std::string& path() const { return path_; }
  uint64_t bytes_written() const { return written_; }

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
};

// Convenience: the whole content at once.
Status WriteFileAtomically(const std::string& path, const std::string& content);

}  // namespace air::engine
