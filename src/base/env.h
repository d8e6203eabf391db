// Env: the one seam between air and the operating system (leveldb's Env).
//
// Files, directories, locks, the clock, environment variables and ports are reached through an
// Env so tests can inject faults (a full disk, EIO on a read, a crash between a write and its
// rename, a frozen clock). The virtual calls are the primitives a fault test overrides
// (base/env_wrapper.h): opening a file to read or write (whose streams carry every byte),
// renaming (replacing or not), syncing a directory, locking. ReadFile, AppendToFile and
// WriteFileAtomic are built on them here, once, so a fault injected in a primitive reaches every
// caller. PosixEnv is the real implementation; DefaultEnv() returns a process-wide stateless
// instance. Implementations must be safe to call from several threads; a stream or lock is used by
// one.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace air {

// A file opened for writing (leveldb's WritableFile). Errors name the file.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual const std::string& path() const = 0;
  virtual Status Append(std::string_view data) = 0;
  // Appends the whole content of the file `source`: a copy-on-write clone where the file system
  // can, else an in-kernel copy (large files never pass through memory).
  virtual Status AppendFileContents(const std::string& source) = 0;
  virtual Status Sync() = 0;  // fsync
  // Closing twice is fine; the destructor closes without reporting.
  virtual Status Close() = 0;
};

// A file read from its start to its end. Read returns 0 bytes at the end.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  virtual const std::string& path() const = 0;
  virtual Result<size_t> Read(char* buffer, size_t size) = 0;
};

// How NewWritableFile opens its file. None follows a symlink (O_NOFOLLOW); an existing file
// is opened only when it is this user's (base/posix_io.h, OpenOwnFileForWrite).
enum class WriteMode {
  kCreateNew,  // O_EXCL: fails when the path exists
  kTruncate,   // create or truncate
  kAppend,     // create or append
};

// An advisory flock(2) on a lock file, held until the object is destroyed (each lock opens its
// own file description, so two in one process exclude each other too). Movable, not copyable.
class FileLock {
 public:
  enum class Mode { kShared, kExclusive };
  FileLock() = default;
  explicit FileLock(int fd) : fd_(fd) {}
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// What lstat(2) (or stat(2)) says of a path: its type, owner and permission bits.
struct PathInfo {
  enum class Type { kFile, kDirectory, kSymlink, kOther };
  Type type = Type::kOther;
  uid_t owner = 0;
  mode_t mode = 0;  // the permission bits (& 07777)
};

class Env {
 public:
  virtual ~Env() = default;

  // --- files and directories: the primitives ---
  virtual Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) = 0;
  // `mode` is exact (the umask does not apply) for a file this call creates.
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                                WriteMode how,
                                                                mode_t mode = 0644) = 0;
  // rename(2): atomic replacement of `to` on one file system.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // renameat2(RENAME_NOREPLACE): as RenameFile, but kAlreadyExists when `to` exists (atomically:
  // two racing callers never both succeed).
  virtual Status RenameFileNoReplace(const std::string& from, const std::string& to) = 0;
  // unlink(2); a missing file is fine.
  virtual Status RemoveFile(const std::string& path) = 0;
  // fsync of a directory, so that a rename or a new file in it survives a crash.
  virtual Status SyncDir(const std::string& dir) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  virtual bool IsDirectory(const std::string& path) = 0;
  // mkdir -p; existing directories are fine.
  virtual Status CreateDirs(const std::string& path, mode_t mode = 0755) = 0;
  // lstat(2) (`follow_symlinks`: stat(2)); kNotFound when the path does not exist.
  virtual Result<PathInfo> GetPathInfo(const std::string& path, bool follow_symlinks) = 0;
  // chmod(2).
  virtual Status ChangeMode(const std::string& path, mode_t mode) = 0;
  // rm -rf; a missing path is fine.
  virtual Status RemoveAll(const std::string& path) = 0;
  // Names (not paths) of the entries of a directory, sorted, without "." and "..".
  virtual Result<std::vector<std::string>> ListDir(const std::string& path) = 0;
  virtual Result<uint64_t> FileSize(const std::string& path) = 0;
  // The last modification time (mtime), microseconds since the epoch.
  virtual Result<int64_t> FileModifiedMicros(const std::string& path) = 0;
  // Waits for the lock on `path` (created 0600 when missing, never through a symlink), polling
  // `should_stop` (when set) every 100 ms; kCancelled when it says stop.
  virtual Result<FileLock> LockFile(const std::string& path, FileLock::Mode mode,
                                    const std::function<bool()>& should_stop = {}) = 0;

  // --- files: built on the primitives (base/env.cc, base/atomic_file.h) ---
  Result<std::string> ReadFile(const std::string& path);
  // Writes `data` to a temporary file created with `mode` beside `path`, fsyncs it, renames it
  // over `path` and fsyncs the directory (base/atomic_file.h): readers see the old or the new
  // file, never a torn one.
  Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode = 0644);
  Status AppendToFile(const std::string& path, std::string_view data);

  // --- clock ---
  virtual int64_t NowMicros() = 0;        // wall clock, microseconds since the epoch
  virtual int64_t MonotonicMicros() = 0;  // for durations and deadlines
  virtual void SleepMicros(int64_t micros) = 0;

  // --- process environment ---
  virtual std::optional<std::string> GetEnv(const std::string& name) = 0;

  // --- network ---
  // A TCP port free on every local address when asked, chosen below the kernel's ephemeral
  // range so that no bind(0) or outgoing connect() can take it before its user binds it.
  virtual Result<int> PickFreePort() = 0;
};

// The real, stateless POSIX implementation, shared by the process.
Env* DefaultEnv();

}  // namespace air
