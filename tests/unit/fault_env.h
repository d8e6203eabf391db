// FaultEnv: the real Env with faults injected where a test says, through the Env's primitives
// (base/env_wrapper.h), so they reach every read and write made through it:
//   - FailWritesUnder(prefix, err): each file opened for writing under `prefix` fails its
//     first write (a full disk: ENOSPC; a dying disk: EIO), the file being created first;
//   - FailReadsUnder(prefix, err): each read of a file under `prefix` fails (EIO);
//   - TearReadsUnder(prefix): each file under `prefix` reads back as its first half;
//   - BeforeRename(fn): runs fn(from, to) before each rename (replacing or not); a test "crashes"
//   the process
//     between a write and its rename with `_exit` (in a gtest death test's child).
// Thread safety: configure before use; then as the real Env.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/env_wrapper.h"

namespace air::testing {

class FaultEnv : public EnvWrapper {
 public:
  FaultEnv() : EnvWrapper(DefaultEnv()) {}

  void FailWritesUnder(std::string prefix, int err) { write_faults_.push_back({prefix, err}); }
  void FailReadsUnder(std::string prefix, int err) { read_faults_.push_back({prefix, err}); }
  void TearReadsUnder(std::string prefix) { torn_.push_back(std::move(prefix)); }
  void BeforeRename(std::function<void(const std::string&, const std::string&)> fn) {
    before_rename_ = std::move(fn);
  }
  int writes_failed() const { return writes_failed_; }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, WriteMode how,
                                                        mode_t mode) override {
    AIR_ASSIGN_OR_RETURN(auto file, target()->NewWritableFile(path, how, mode));
    for (const auto& [prefix, err] : write_faults_) {
      if (path.rfind(prefix, 0) == 0) {
        ++writes_failed_;
        return std::unique_ptr<WritableFile>(new FailingWritable(std::move(file), err));
      }
    }
    return file;
  }

  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    AIR_ASSIGN_OR_RETURN(auto file, target()->NewSequentialFile(path));
    for (const auto& [prefix, err] : read_faults_) {
      if (path.rfind(prefix, 0) == 0) {
        return std::unique_ptr<SequentialFile>(new FailingReadable(std::move(file), err));
      }
    }
    for (const auto& prefix : torn_) {
      if (path.rfind(prefix, 0) != 0) continue;
      auto size = target()->FileSize(path);
      return std::unique_ptr<SequentialFile>(
          new TornReadable(std::move(file), size.ok() ? *size / 2 : 0));
    }
    return file;
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (before_rename_) before_rename_(from, to);
    return target()->RenameFile(from, to);
  }
  Status RenameFileNoReplace(const std::string& from, const std::string& to) override {
    if (before_rename_) before_rename_(from, to);
    return target()->RenameFileNoReplace(from, to);
  }

 private:
  class FailingWritable : public WritableFile {
   public:
    FailingWritable(std::unique_ptr<WritableFile> real, int err)
        : real_(std::move(real)), err_(err) {}
    const std::string& path() const override { return real_->path(); }
    Status Append(std::string_view) override { return ErrnoStatus("write " + path(), err_); }
    Status AppendFileContents(const std::string&) override {
      return ErrnoStatus("write " + path(), err_);
    }
    Status Sync() override { return real_->Sync(); }
    Status Close() override { return real_->Close(); }

   private:
    std::unique_ptr<WritableFile> real_;
    int err_;
  };

  class FailingReadable : public SequentialFile {
   public:
    FailingReadable(std::unique_ptr<SequentialFile> real, int err)
        : real_(std::move(real)), err_(err) {}
    const std::string& path() const override { return real_->path(); }
    Result<size_t> Read(char*, size_t) override { return ErrnoStatus("read " + path(), err_); }

   private:
    std::unique_ptr<SequentialFile> real_;
    int err_;
  };

  class TornReadable : public SequentialFile {
   public:
    TornReadable(std::unique_ptr<SequentialFile> real, uint64_t keep)
        : real_(std::move(real)), left_(keep) {}
    const std::string& path() const override { return real_->path(); }
    Result<size_t> Read(char* buffer, size_t size) override {
      if (left_ == 0) return size_t{0};
      AIR_ASSIGN_OR_RETURN(size_t n, real_->Read(buffer, std::min<uint64_t>(size, left_)));
      left_ -= n;
      return n;
    }

   private:
    std::unique_ptr<SequentialFile> real_;
    uint64_t left_;
  };

  std::vector<std::pair<std::string, int>> write_faults_;
  std::vector<std::pair<std::string, int>> read_faults_;
  std::vector<std::string> torn_;
  std::function<void(const std::string&, const std::string&)> before_rename_;
  int writes_failed_ = 0;
};

}  // namespace air::testing
