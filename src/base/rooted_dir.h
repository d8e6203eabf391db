// Files below a root directory, reached without ever following a symbolic link and without
// leaving the root: what `air server` uses for run artifacts and `air volumes` for volumes, the
// two places where a path from a request or a command line meets a tree that other processes
// (nodes, other users of a shared root) can write into.
//
// Every component of a relative path is opened with openat(O_NOFOLLOW) from its parent's
// descriptor, starting at the root's: a link anywhere on the path, planted before or during the
// call, is refused (kInvalidArgument, naming it) instead of followed, and ".." cannot climb out.
// Relative paths are '/'-separated; "", "." and ".." components are refused (callers check their
// own naming rules first). The root itself is opened by its path once (it may be reached through
// links its owner set up, e.g. a symlinked home).
//
// Writes go through AtomicFileWriter (PendingFile below): a fresh temporary name beside the
// target, renamed into place, so a reader never sees half a file and nothing is left behind on
// an error.
// Thread safety: a RootedDir holds one descriptor and no other state; its methods may be called
// from several threads. Fd and PendingFile belong to one thread at a time.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/atomic_file.h"
#include "base/env.h"
#include "base/status.h"

namespace air {

// An owned file descriptor (closed on destruction).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// One directory entry as lstat sees it (a link is reported as a link, never followed).
struct DirEntry {
  enum class Type { kFile, kDirectory, kSymlink, kOther };
  std::string name;
  Type type = Type::kOther;
  uint64_t size = 0;        // regular files only
  int64_t modified_us = 0;  // mtime
};
const char* DirEntryTypeName(DirEntry::Type type);  // "file", "directory", "symlink", "other"

// The entries of the open directory `dir_fd` (sorted by name; "." and ".." left out).
Result<std::vector<DirEntry>> ListDirAt(int dir_fd, const std::string& shown_as);

// Removes `name` in `dir_fd`: a file or link itself (a link's target is never touched), a
// directory with everything below it when `recursive` (else only when empty). Returns how many
// entries were removed. `shown_as` names it in errors.
Result<uint64_t> RemoveAt(int dir_fd, const std::string& name, bool recursive,
                          const std::string& shown_as);

// Creates an empty directory (mode 0700) under a fresh temporary name beside `name` in `dir_fd`
// and returns that name: where a tree is staged before it is renamed into place.
Result<std::string> CreateTempDirAt(int dir_fd, const std::string& name,
                                    const std::string& shown_as);

// A file being written under a temporary name in the open directory `dir_fd`; Commit()
// renames it to `name`. Dropped without Commit(), the temporary file is removed. It is the
// project's one atomic writer (base/atomic_file.h) through `env`, reaching the directory by its
// descriptor (/proc/self/fd/<dir_fd>/<name>): no path is walked again, so a link planted above
// the directory cannot redirect the write, and fault tests (EnvWrapper) reach every byte.
class PendingFile {
 public:
  // `shown_as` names the destination in errors. `name` is one path component.
  static Result<PendingFile> Create(Env* env, int dir_fd, const std::string& name, mode_t mode,
                                    std::string shown_as);

  Status Write(std::string_view data) { return writer_->Append(data); }
  uint64_t written() const { return writer_->bytes_written(); }
  // fsync, then rename over `name` (replace) or only when `name` does not exist (else
  // kAlreadyExists: "'<shown_as>' already exists").
  Status Commit(bool replace) { return replace ? writer_->Commit() : writer_->CommitNoReplace(); }

 private:
  explicit PendingFile(std::unique_ptr<AtomicFileWriter> writer) : writer_(std::move(writer)) {}
  // The caller keeps `dir_fd` open until Commit or destruction.
  std::unique_ptr<AtomicFileWriter> writer_;
};

class RootedDir {
 public:
  // Opens the root directory. `shown_as` is how paths below it appear in messages
  // (e.g. "/Volumes"); "" shows them relative.
  static Result<RootedDir> Open(const std::string& root, std::string shown_as);

  const std::string& root() const { return root_; }
  int fd() const { return fd_.get(); }
  // How `rel` appears in messages.
  std::string Shown(std::string_view rel) const;

  // The directory `rel` ("" is the root). Missing directories are created (mode) when
  // `create`, else kNotFound.
  Result<Fd> OpenDir(std::string_view rel, bool create, mode_t mode = 0755) const;
  // The directory holding the last component of `rel` (created when `create`), and that
  // component's name in *leaf. `rel` must not be "".
  Result<Fd> OpenParent(std::string_view rel, bool create, std::string* leaf,
                        mode_t mode = 0755) const;
  // lstat of `rel`: nullopt when it does not exist.
  Result<std::optional<struct stat>> Lstat(std::string_view rel) const;
  // A regular file for reading (a link, directory or device is refused).
  Result<Fd> OpenFileForRead(std::string_view rel) const;

 private:
  RootedDir(std::string root, std::string shown_as, Fd fd)
      : root_(std::move(root)), shown_as_(std::move(shown_as)), fd_(std::move(fd)) {}
  std::string root_;
  std::string shown_as_;
  Fd fd_;
};

// Splits a relative path into components, refusing "", "." and ".." parts, a leading '/' and
// NUL bytes (kInvalidArgument naming `shown_as`). A trailing '/' is ignored.
Result<std::vector<std::string>> SplitRelativePath(std::string_view rel,
                                                   const std::string& shown_as);

}  // namespace air
