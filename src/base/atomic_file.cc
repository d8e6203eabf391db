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

constexpr std::string_view kTempMarker = ".tmp.";
constexpr size_t kRandomDigits = 8;

std::string RandomSuffix() {
  std::random_device seed;
  return fmt::format("{:08x}", seed());
}

// Every occurrence of `from` in `text` replaced by `to`.
std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  if (from.empty() || from == to) return text;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

}  // namespace

std::string AtomicTempName(std::string_view name) {
  // At most 100 bytes of the name, so that the temporary stays within NAME_MAX.
  return fmt::format(".{}{}{}", name.substr(0, 100), kTempMarker, RandomSuffix());
}

bool IsAtomicTempName(std::string_view name) {
  const size_t tail = kTempMarker.size() + kRandomDigits;
  if (name.size() < 1 + tail || name[0] != '.') return false;
  std::string_view end = name.substr(name.size() - tail);
  if (end.substr(0, kTempMarker.size()) != kTempMarker) return false;
  for (char c : end.substr(kTempMarker.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

AtomicFileWriter::AtomicFileWriter(Env* env, std::string path, mode_t mode, std::string shown_as)
    : env_(env),
      path_(std::move(path)),
      mode_(mode),
      shown_as_(shown_as.empty() ? path_ : std::move(shown_as)) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_) (void)file_->Close();
  if (!committed_ && !temp_path_.empty()) (void)env_->RemoveFile(temp_path_);
}

Status AtomicFileWriter::Failed(Status status) {
  if (file_) (void)file_->Close();
  file_.reset();
  // The Env's message names the paths it was given; the user knows the target as shown_as_.
  std::string message = ReplaceAll(status.message(), temp_path_, shown_as_);
  message = ReplaceAll(std::move(message), path_, shown_as_);
  if (!temp_path_.empty()) (void)env_->RemoveFile(temp_path_);
  temp_path_.clear();
  if (status.code() == ErrorCode::kResourceExhausted) {
    return ResourceExhausted(
        fmt::format("disk full writing {} after {}: {}", shown_as_, HumanBytes(written_), message));
  }
  if (message.find(shown_as_) != std::string::npos) return Status(status.code(), message);
  return Status(status.code(), fmt::format("writing {}: {}", shown_as_, message));
}

Status AtomicFileWriter::Open() {
  if (file_ || committed_) return FailedPrecondition("AtomicFileWriter::Open twice for " + path_);
  // A name taken by a concurrent writer (or left by a crash) is skipped, never reused.
  for (int tries = 0;; ++tries) {
    const size_t leaf = path_.rfind('/') + 1;  // 0 without a '/'
    std::string temp = path_.substr(0, leaf) + AtomicTempName(std::string_view(path_).substr(leaf));
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

Status AtomicFileWriter::Commit() { return CommitWith(/*replace=*/true); }

Status AtomicFileWriter::CommitNoReplace() { return CommitWith(/*replace=*/false); }

Status AtomicFileWriter::CommitWith(bool replace) {
  if (!file_) return FailedPrecondition("AtomicFileWriter: " + shown_as_ + " is not open");
  if (Status st = file_->Sync(); !st.ok()) return Failed(st);
  if (Status st = file_->Close(); !st.ok()) return Failed(st);
  file_.reset();
  Status renamed =
      replace ? env_->RenameFile(temp_path_, path_) : env_->RenameFileNoReplace(temp_path_, path_);
  if (renamed.code() == ErrorCode::kAlreadyExists) {
    (void)Failed(renamed);
    return AlreadyExists(fmt::format("'{}' already exists", shown_as_));
  }
  if (!renamed.ok()) return Failed(renamed);
  committed_ = true;
  Status synced = env_->SyncDir(DirOf(path_));
  if (synced.ok() || shown_as_ == path_) return synced;
  return Status(synced.code(),
                fmt::format("writing {}: {}", shown_as_,
                            ReplaceAll(synced.message(), DirOf(path_), "its directory")));
}

}  // namespace air
