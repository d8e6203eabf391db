// AtomicFileWriter: the project's one way to replace a file so that readers see either the old
// file or the complete new one (REFERENCES.md §6), through the Env seam:
//   1. the data goes to a fresh temporary name beside the target (AtomicTempName: a hidden
//      ".<name>.tmp.<random>", created exclusively, never through a planted symlink) with the
//      final mode,
//   2. Commit() fsyncs it, closes it, renames it over the target (CommitNoReplace: only when
//      the target does not exist) and fsyncs the directory.
// Destroying a writer that was not committed removes the temporary file; a crash before the
// rename leaves the old target and a stray temporary that readers never open and listings skip
// (IsAtomicTempName). Every error names the target as the user knows it (`shown_as`, by default
// the path; e.g. a volume path when the writer works through /proc/self/fd/<dir>/<name>, see
// base/rooted_dir.h); a full disk says so, with how much had been written.
// Env::WriteFileAtomic is the whole-content shorthand.
// Thread safety: one writer per thread; concurrent writers of one target each get their own
// temporary name (the last rename wins).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/env.h"
#include "base/status.h"

namespace air {

// The temporary name an AtomicFileWriter (or a staged directory, base/rooted_dir.h) uses for
// the directory entry `name`; IsAtomicTempName recognises it (and nothing a user would name).
std::string AtomicTempName(std::string_view name);
bool IsAtomicTempName(std::string_view name);

class AtomicFileWriter {
 public:
  // `shown_as` names the target in errors ("" is `path`).
  AtomicFileWriter(Env* env, std::string path, mode_t mode = 0644, std::string shown_as = "");
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Creates the temporary file.
  Status Open();
  Status Append(std::string_view data);
  Status Append(const void* data, size_t size) {
    return Append(std::string_view(static_cast<const char*>(data), size));
  }
  // Appends a whole existing file (a copy-on-write clone where the file system can).
  Status AppendFileContents(const std::string& source);
  // fsync, close, rename over the target, fsync the directory.
  Status Commit();
  // As Commit, but kAlreadyExists ("'<shown_as>' already exists") when the target exists; the
  // temporary file is then removed.
  Status CommitNoReplace();

  const std::string& path() const { return path_; }
  const std::string& shown_as() const { return shown_as_; }
  // The temporary file, e.g. to verify what was written before Commit (empty before Open).
  const std::string& temp_path() const { return temp_path_; }
  uint64_t bytes_written() const { return written_; }

 private:
  Status Failed(Status status);  // names the target, removes the temporary
  Status CommitWith(bool replace);

  Env* env_;
  std::string path_;
  mode_t mode_;
  std::string shown_as_;
  std::string temp_path_;
  std::unique_ptr<WritableFile> file_;
  uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace air
