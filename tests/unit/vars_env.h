// VarsEnv: the real Env with a fixed set of environment variables, for tests of code that reads
// its configuration from the environment (hub paths, the torchrun/Slurm variables).
// Thread safety: as the real Env; the variables are fixed at construction.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/env.h"

namespace air::testing {

class VarsEnv : public Env {
 public:
  explicit VarsEnv(std::map<std::string, std::string> vars) : vars_(std::move(vars)) {}
  Result<std::string> ReadFile(const std::string& p) override { return real_->ReadFile(p); }
  Status WriteFileAtomic(const std::string& p, std::string_view d, mode_t m) override {
    return real_->WriteFileAtomic(p, d, m);
  }
  Status AppendToFile(const std::string& p, std::string_view d) override {
    return real_->AppendToFile(p, d);
  }
  bool FileExists(const std::string& p) override { return real_->FileExists(p); }
  bool IsDirectory(const std::string& p) override { return real_->IsDirectory(p); }
  Status CreateDirs(const std::string& p, mode_t m) override { return real_->CreateDirs(p, m); }
  Status RemoveAll(const std::string& p) override { return real_->RemoveAll(p); }
  Result<std::vector<std::string>> ListDir(const std::string& p) override {
    return real_->ListDir(p);
  }
  Result<uint64_t> FileSize(const std::string& p) override { return real_->FileSize(p); }
  int64_t NowMicros() override { return real_->NowMicros(); }
  int64_t MonotonicMicros() override { return real_->MonotonicMicros(); }
  void SleepMicros(int64_t m) override { real_->SleepMicros(m); }
  std::optional<std::string> GetEnv(const std::string& name) override {
    auto it = vars_.find(name);
    if (it == vars_.end()) return std::nullopt;
    return it->second;
  }
  Result<int> PickFreePort() override { return real_->PickFreePort(); }

 private:
  Env* real_ = DefaultEnv();
  std::map<std::string, std::string> vars_;
};

}  // namespace air::testing
