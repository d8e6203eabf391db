// The Env conveniences built on its primitives, and FileLock's release (see env.h).
#include "base/env.h"

#include <unistd.h>

#include "base/atomic_file.h"

namespace air {

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

Result<std::string> Env::ReadFile(const std::string& path) {
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, NewSequentialFile(path));
  std::string out;
  char buffer[1 << 16];
  while (true) {
    AIR_ASSIGN_OR_RETURN(size_t n, file->Read(buffer, sizeof(buffer)));
    if (n == 0) return out;
    out.append(buffer, n);
  }
}

Status Env::WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode) {
  AtomicFileWriter writer(this, path, mode);
  AIR_RETURN_IF_ERROR(writer.Open());
  AIR_RETURN_IF_ERROR(writer.Append(data));
  return writer.Commit();
}

Status Env::AppendToFile(const std::string& path, std::string_view data) {
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                       NewWritableFile(path, WriteMode::kAppend));
  AIR_RETURN_IF_ERROR(file->Append(data));
  return file->Close();
}

}  // namespace air
