// AtomicFileWriter over the Env's primitives (see atomic_file.h).
#include "base/atomic_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <random>

#include "base/strings.h"

namespace air {
namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string RandomSuffix() {
  std::random_device seed;
  return fmt::format("{:08x}", seed());
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(Env* env, std::string path, mode_t mode)
    : env_(env), path_(std::move(path)), mode_(mode) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_) (void)file_->Close();
  if (!committed_ && !temp_path_.empty()) (void)env_->RemoveFile(temp_path_);
}

Status AtomicFileWriter::Failed(Status status) {
  if (file_) (void)file_->Close();
  file_.reset();
  if (!temp_path_.empty()) (void)env_->RemoveFile(temp_path_);
  temp_path_.clear();
  if (status.code() == ErrorCode::kResourceExhausted) {
    return ResourceExhausted(fmt::format("disk full writing {} after {}: {}", path_,
                                         HumanBytes(written_), status.message()));
  }
  if (status.message().find(path_) != std::string::npos) return status;
  return Status(status.code(), fmt::format("writing {}: {}", path_, status.message()));
}

Status AtomicFileWriter::Open() {
  if (file_ || committed_) return FailedPrecondition("AtomicFileWriter::Open twice for " + path_);
  // A name taken by a concurrent writer (or left by a crash) is skipped, never reused.
  for (int tries = 0;; ++tries) {
    std::string temp = path_ + ".tmp." + RandomSuffix();
    auto opened = env_->NewWritableFile(temp, WriteMode::kCreateNew, mode_);
    if (opened.ok()) {
      temp_path_ = std::move(temp);
      file_ = std::move(*opened);
      return Status::Ok();
    }
    if (opened.status().code() != ErrorCode::kAlreadyExists || tries >= 8) {
      return Failed(opened.status());
    }
  }
}

Status AtomicFileWriter::Append(std::string_view data) {
  if (!file_) return FailedPrecondition("AtomicFileWriter: " + path_ + " is not open");
  if (Status st = file_->Append(data); !st.ok()) return Failed(st);
  written_ += data.size();
  return Status::Ok();
}

Status AtomicFileWriter::AppendFileContents(const std::string& source) {
  if (!file_) return FailedPrecondition("AtomicFileWriter: " + path_ + " is not open");
  if (Status st = file_->AppendFileContents(source); !st.ok()) return Failed(st);
  auto size = env_->FileSize(temp_path_);
  if (size.ok()) written_ = *size;
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  if (!file_) return FailedPrecondition("AtomicFileWriter: " + path_ + " is not open");
  if (Status st = file_->Sync(); !st.ok()) return Failed(st);
  if (Status st = file_->Close(); !st.ok()) return Failed(st);
  file_.reset();
  if (Status st = env_->RenameFile(temp_path_, path_); !st.ok()) return Failed(st);
  committed_ = true;
  return env_->SyncDir(DirOf(path_));
}

}  // namespace air
