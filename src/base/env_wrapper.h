// EnvWrapper: an Env that forwards every call to another one (leveldb's EnvWrapper). A fault
// test derives from it and overrides the one call it breaks (a full disk on the manifest, a
// torn report read back, a frozen clock), everything else staying the real PosixEnv.
// Thread safety: as the target Env.
#pragma once

#include "base/env.h"

namespace air {

class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  Result<std::string> ReadFile(const std::string& path) override { return target_->ReadFile(path); }
  Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode) override {
    return target_->WriteFileAtomic(path, data, mode);
  }
  Status AppendToFile(const std::string& path, std::string_view data) override {
    return target_->AppendToFile(path, data);
  }
  bool FileExists(const std::string& path) override { return target_->FileExists(path); }
  bool IsDirectory(const std::string& path) override { return target_->IsDirectory(path); }
  Status CreateDirs(const std::string& path, mode_t mode) override {
    return target_->CreateDirs(path, mode);
  }
  Status RemoveAll(const std::string& path) override { return target_->RemoveAll(path); }
  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    return target_->ListDir(path);
  }
  Result<uint64_t> FileSize(const std::string& path) override { return target_->FileSize(path); }
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
