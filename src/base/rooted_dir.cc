// openat walks below a root, listing, removal and write-then-rename (see rooted_dir.h).
#include "base/rooted_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace air {
namespace {

Status LinkRefused(const std::string& shown) {
  return InvalidArgument(fmt::format(
      "'{}' is a symbolic link; air never follows links here (a link could lead anywhere "
      "outside the root)",
      shown));
}

// The type of an lstat result.
DirEntry::Type TypeOf(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return DirEntry::Type::kFile;
  if (S_ISDIR(st.st_mode)) return DirEntry::Type::kDirectory;
  if (S_ISLNK(st.st_mode)) return DirEntry::Type::kSymlink;
  return DirEntry::Type::kOther;
}

// Opens the directory `name` in `dir_fd` without following a link; creates it when missing and
// `create`.
Result<Fd> OpenChildDir(int dir_fd, const std::string& name, bool create, mode_t mode,
                        const std::string& shown) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) return Fd(fd);
    int err = errno;
    if (err == ENOENT && create && attempt == 0) {
      if (::mkdirat(dir_fd, name.c_str(), mode) != 0 && errno != EEXIST) {
        return ErrnoStatus("create " + shown, errno);
      }
      continue;  // open what is there now (ours, or a concurrent creator's)
    }
    if (err == ELOOP || err == ENOTDIR) {
      struct stat st {};
      if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        return LinkRefused(shown);
      }
      if (err == ENOTDIR) return InvalidArgument(fmt::format("'{}' is not a directory", shown));
    }
    if (err == ENOENT) return NotFound(fmt::format("'{}' does not exist", shown));
    return ErrnoStatus("open " + shown, err);
  }
  return NotFound(fmt::format("'{}' does not exist", shown));
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

const char* DirEntryTypeName(DirEntry::Type type) {
  switch (type) {
    case DirEntry::Type::kFile:
      return "file";
    case DirEntry::Type::kDirectory:
      return "directory";
    case DirEntry::Type::kSymlink:
      return "symlink";
    case DirEntry::Type::kOther:
      break;
  }
  return "other";
}

Result<std::vector<std::string>> SplitRelativePath(std::string_view rel,
                                                   const std::string& shown_as) {
  std::vector<std::string> parts;
  if (rel.find('\0') != std::string_view::npos) {
    return InvalidArgument(fmt::format("'{}' contains a NUL byte", shown_as));
  }
  if (!rel.empty() && rel.front() == '/') {
    return InvalidArgument(fmt::format("'{}' must be relative", shown_as));
  }
  while (!rel.empty() && rel.back() == '/') rel.remove_suffix(1);
  if (rel.empty()) return parts;
  size_t start = 0;
  while (true) {
    size_t slash = rel.find('/', start);
    std::string_view part =
        rel.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty() || part == "." || part == "..") {
      return InvalidArgument(
          fmt::format("'{}' has an empty, '.' or '..' component; give a plain path", shown_as));
    }
    parts.emplace_back(part);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return parts;
}

Result<std::vector<DirEntry>> ListDirAt(int dir_fd, const std::string& shown_as) {
  int copy = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) return ErrnoStatus("open " + shown_as, errno);
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    int err = errno;
    ::close(copy);
    return ErrnoStatus("list " + shown_as, err);
  }
  std::vector<DirEntry> entries;
  while (struct dirent* d = ::readdir(dir)) {
    std::string name = d->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    DirEntry entry;
    entry.name = std::move(name);
    entry.type = TypeOf(st);
    entry.size = entry.type == DirEntry::Type::kFile ? static_cast<uint64_t>(st.st_size) : 0;
    entry.modified_us = int64_t{st.st_mtim.tv_sec} * 1'000'000 + st.st_mtim.tv_nsec / 1000;
    entries.push_back(std::move(entry));
  }
  ::closedir(dir);
  std::sort(entries.begin(), entries.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return entries;
}

Result<uint64_t> RemoveAt(int dir_fd, const std::string& name, bool recursive,
                          const std::string& shown_as) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return NotFound(fmt::format("'{}' does not exist", shown_as));
    return ErrnoStatus("stat " + shown_as, errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dir_fd, name.c_str(), 0) != 0) return ErrnoStatus("remove " + shown_as, errno);
    return uint64_t{1};
  }
  uint64_t removed = 0;
  if (recursive) {
    AIR_ASSIGN_OR_RETURN(Fd child, OpenChildDir(dir_fd, name, false, 0, shown_as));
    AIR_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(child.get(), shown_as));
    for (const DirEntry& e : entries) {
      AIR_ASSIGN_OR_RETURN(uint64_t n,
                           RemoveAt(child.get(), e.name, true, shown_as + "/" + e.name));
      removed += n;
    }
  }
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0) {
    if (errno == ENOTEMPTY || errno == EEXIST) {
      return InvalidArgument(fmt::format("'{}' is a directory that is not empty", shown_as));
    }
    return ErrnoStatus("remove " + shown_as, errno);
  }
  return removed + 1;
}

Result<std::string> CreateTempDirAt(int dir_fd, const std::string& name,
                                    const std::string& shown_as) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string temp = AtomicTempName(name);
    if (::mkdirat(dir_fd, temp.c_str(), 0700) == 0) return temp;
    if (errno != EEXIST) return ErrnoStatus("create a temporary directory for " + shown_as, errno);
  }
  return Internal("no free temporary name for " + shown_as);
}

Result<PendingFile> PendingFile::Create(Env* env, int dir_fd, const std::string& name, mode_t mode,
                                        std::string shown_as) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return InvalidArgument(fmt::format("'{}' is not a file name", shown_as));
  }
  auto writer = std::make_unique<AtomicFileWriter>(
      env, fmt::format("/proc/self/fd/{}/{}", dir_fd, name), mode, std::move(shown_as));
  AIR_RETURN_IF_ERROR(writer->Open());
  return PendingFile(std::move(writer));
}

Result<RootedDir> RootedDir::Open(const std::string& root, std::string shown_as) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + root, errno);
  return RootedDir(root, std::move(shown_as), Fd(fd));
}

std::string RootedDir::Shown(std::string_view rel) const {
  if (shown_as_.empty()) return std::string(rel);
  if (rel.empty()) return shown_as_;
  return shown_as_ + "/" + std::string(rel);
}

Result<Fd> RootedDir::OpenDir(std::string_view rel, bool create, mode_t mode) const {
  AIR_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitRelativePath(rel, Shown(rel)));
  int dup = ::openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) return ErrnoStatus("open " + root_, errno);
  Fd current(dup);
  std::string walked;
  for (const std::string& part : parts) {
    walked = walked.empty() ? part : walked + "/" + part;
    AIR_ASSIGN_OR_RETURN(current, OpenChildDir(current.get(), part, create, mode, Shown(walked)));
  }
  return current;
}

Result<Fd> RootedDir::OpenParent(std::string_view rel, bool create, std::string* leaf,
                                 mode_t mode) const {
  AIR_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitRelativePath(rel, Shown(rel)));
  if (parts.empty()) return InvalidArgument(fmt::format("'{}' names the root", Shown(rel)));
  *leaf = parts.back();
  std::string parent;
  for (size_t i = 0; i + 1 < parts.size(); ++i) parent += (i ? "/" : "") + parts[i];
  return OpenDir(parent, create, mode);
}

Result<std::optional<struct stat>> RootedDir::Lstat(std::string_view rel) const {
  AIR_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitRelativePath(rel, Shown(rel)));
  struct stat st {};
  if (parts.empty()) {
    if (::fstat(fd_.get(), &st) != 0) return ErrnoStatus("stat " + root_, errno);
    return std::optional<struct stat>(st);
  }
  std::string leaf;
  auto parent = OpenParent(rel, false, &leaf);
  if (!parent.ok()) {
    if (parent.status().code() == ErrorCode::kNotFound) return std::optional<struct stat>();
    return parent.status();
  }
  if (::fstatat(parent->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return std::optional<struct stat>();
    return ErrnoStatus("stat " + Shown(rel), errno);
  }
  return std::optional<struct stat>(st);
}

Result<Fd> RootedDir::OpenFileForRead(std::string_view rel) const {
  std::string leaf;
  AIR_ASSIGN_OR_RETURN(Fd parent, OpenParent(rel, false, &leaf));
  // O_NONBLOCK: a FIFO planted here must not hang the reader; cleared below for a file.
  int fd = ::openat(parent.get(), leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP) return LinkRefused(Shown(rel));
    if (err == ENOENT) return NotFound(fmt::format("'{}' does not exist", Shown(rel)));
    return ErrnoStatus("open " + Shown(rel), err);
  }
  Fd file(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus("stat " + Shown(rel), errno);
  if (S_ISDIR(st.st_mode)) return InvalidArgument(fmt::format("'{}' is a directory", Shown(rel)));
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(fmt::format("'{}' is not a regular file", Shown(rel)));
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return file;
}

}  // namespace air
