// AtomicFileWriter: temp file, fsync, rename, fsync the directory (see atomic_file.h).
#include "engine/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/strings.h"

namespace air::engine {

namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open directory " + dir + " to sync it", errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus("cannot sync directory " + dir, err);
  return Status::Ok();
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)), temp_path_(path_ + ".tmp." + std::to_string(::getpid())) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && fd_ != -1) ::unlink(temp_path_.c_str());
}

Status AtomicFileWriter::Open() {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    fd_ = -1;
    return ErrnoStatus("cannot create " + temp_path_ + " (to write " + path_ + ")", errno);
  }
  return Status::Ok();
}

Status AtomicFileWriter::Append(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      if (err == ENOSPC) {
        return ResourceExhausted("disk full writing " + path_ + " after " + HumanBytes(written_) +
                                 "; " + HumanBytes(size) + " more were needed in this write");
      }
      return ErrnoStatus("cannot write " + temp_path_, err);
    }
    p += n;
    size -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  if (::fsync(fd_) != 0) return ErrnoStatus("cannot sync " + temp_path_, errno);
  if (::close(fd_) != 0) {
    fd_ = -2;  // closed; the destructor must still unlink
    return ErrnoStatus("cannot close " + temp_path_, errno);
  }
  fd_ = -2;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return ErrnoStatus("cannot rename " + temp_path_ + " to " + path_, errno);
  }
  committed_ = true;
  return FsyncDir(DirOf(path_));
}

Status WriteFileAtomically(const std::string& path, const std::string& content) {
  AtomicFileWriter writer(path);
  AIR_RETURN_IF_ERROR(writer.Open());
  AIR_RETURN_IF_ERROR(writer.Append(content.data(), content.size()));
  return writer.Commit();
}

}  // namespace air::engine
