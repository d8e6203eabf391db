// EnvWrapper: an Env that forwards every call to another one (leveldb's EnvWrapper). A fault
// test derives from it and overrides the one primitive it breaks (a full disk under a
// directory, EIO on a read, a crash between a write and its rename, a frozen clock),
// everything else staying the real PosixEnv. Env's conveniences (ReadFile, WriteFileAtomic,
// AppendToFile) go through the primitives, so the fault reaches them too.
// Thread safety: as the target Env.
#pragma once

#include "base/env.h"

namespace air {

class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    return target_->NewSequentialFile(path);
  }
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, WriteMode how,
                                                        mode_t mode) override {
    return target_->NewWritableFile(path, how, mode);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    return target_->RenameFile(from, to);
  }
  Status RenameFileNoReplace(const std::string& from, const std::string& to) override {
    return target_->RenameFileNoReplace(from, to);
  }
  Status RemoveFile(const std::string& path) override { return target_->RemoveFile(path); }
  Status SyncDir(const std::string& dir) override { return target_->SyncDir(dir); }
  bool FileExists(const std::string& path) override { return target_->FileExists(path); }
  bool IsDirectory(const std::string& path) override { return target_->IsDirectory(path); }
  Status CreateDirs(const std::string& path, mode_t mode) override {
    return target_->CreateDirs(path, mode);
  }
  Result<PathInfo> GetPathInfo(const std::string& path, bool follow_symlinks) override {
    return target_->GetPathInfo(path, follow_symlinks);
  }
  Status ChangeMode(const std::string& path, mode_t mode) override {
    return target_->ChangeMode(path, mode);
  }
  Status RemoveAll(const std::string& path) override { return target_->RemoveAll(path); }
  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    return target_->ListDir(path);
  }
  Result<uint64_t> FileSize(const std::string& path) override { return target_->FileSize(path); }
  Result<int64_t> FileModifiedMicros(const std::string& path) override {
    return target_->FileModifiedMicros(path);
  }
  Result<FileLock> LockFile(const std::string& path, FileLock::Mode mode,
                            const std::function<bool()>& should_stop) override {
    return target_->LockFile(path, mode, should_stop);
  }
  int64_t NowMicros() override { return target_->NowMicros(); }
  int64_t MonotonicMicros() override { return target_->MonotonicMicros(); }
  void SleepMicros(int64_t micros) override { target_->SleepMicros(micros); }
  std::optional<std::string> GetEnv(const std::string& name) override {
    return target_->GetEnv(name);
  }
  Result<int> PickFreePort() override { return target_->PickFreePort(); }

 private:
  Env* target_;
};

}  // namespace air
