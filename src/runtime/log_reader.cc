// Reading whole, tailed and growing log files (see log_reader.h).
#include "runtime/log_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "base/strings.h"

namespace air::runtime {
namespace {

constexpr size_t kBackBlock = 64 * 1024;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string CutNote(uint64_t dropped) {
  return fmt::format(" [air: {} more bytes of this line not shown]", dropped);
}

// Reads exactly [offset, offset + size) into `out`.
Status ReadAt(int fd, uint64_t offset, size_t size, std::string* out, const std::string& path) {
  out->resize(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, out->data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + path, errno);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  return Status::Ok();
}

Result<uint64_t> SizeOf(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus("stat " + path, errno);
  return static_cast<uint64_t>(st.st_size);
}

// Appends the lines of one file, newest first, to `newest_first`; sets *stop when the limit or a
// rejected line was reached.
Status ReadBackward(const std::string& path, size_t max_lines,
                    const std::function<bool(const std::string&)>& keep,
                    std::vector<std::string>* newest_first, bool* stop) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("open " + path, errno);
  }
  AIR_ASSIGN_OR_RETURN(uint64_t pos, SizeOf(fd.get(), path));
  std::string last;
  if (pos > 0) {
    AIR_RETURN_IF_ERROR(ReadAt(fd.get(), pos - 1, 1, &last, path));
    if (last == "\n") --pos;  // the final newline ends the last line; it starts no new one
  }
  const bool has_lines = pos > 0;
  std::string carry;  // the beginning (up to kMaxLogLineBytes) of the line being assembled
  uint64_t dropped = 0;
  auto emit = [&](std::string line) {
    if (line.size() > kMaxLogLineBytes) {
      dropped += line.size() - kMaxLogLineBytes;
      line.resize(kMaxLogLineBytes);
    }
    if (dropped > 0) line += CutNote(dropped);
    dropped = 0;
    if (keep && !keep(line)) {
      *stop = true;
      return;
    }
    newest_first->push_back(std::move(line));
    if (max_lines > 0 && newest_first->size() >= max_lines) *stop = true;
  };
  std::string block;
  while (pos > 0 && !*stop) {
    size_t size = static_cast<size_t>(std::min<uint64_t>(kBackBlock, pos));
    pos -= size;
    AIR_RETURN_IF_ERROR(ReadAt(fd.get(), pos, size, &block, path));
    block += carry;
    size_t newline;
    while (!*stop && (newline = block.rfind('\n')) != std::string::npos) {
      emit(block.substr(newline + 1));
      block.resize(newline);
    }
    if (*stop) break;
    if (block.size() > kMaxLogLineBytes) {
      dropped += block.size() - kMaxLogLineBytes;
      block.resize(kMaxLogLineBytes);
    }
    carry.swap(block);
  }
  if (!*stop && has_lines) emit(std::move(carry));  // the file's first line
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> ReadLogLines(Env* env, const std::string& path) {
  AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  std::vector<std::string> lines = Split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

std::vector<std::string> TailLines(std::vector<std::string> lines, int count) {
  if (count <= 0 || static_cast<size_t>(count) >= lines.size()) return lines;
  lines.erase(lines.begin(), lines.end() - count);
  return lines;
}

std::vector<std::string> LogParts(Env* env, const std::string& path) {
  std::vector<std::string> parts;
  if (env->FileExists(path)) parts.push_back(path);
  for (int i = 1;; ++i) {
    std::string part = fmt::format("{}.{}", path, i);
    if (!env->FileExists(part)) break;
    parts.push_back(part);
  }
  return parts;
}

Result<std::vector<std::string>> ReadLastLines(
    Env* env, const std::string& path, size_t max_lines,
    const std::function<bool(const std::string&)>& keep) {
  std::vector<std::string> lines;
  bool stop = false;
  for (const auto& part : LogParts(env, path)) {
    AIR_RETURN_IF_ERROR(ReadBackward(part, max_lines, keep, &lines, &stop));
    if (stop) break;
  }
  std::reverse(lines.begin(), lines.end());
  return lines;
}

Status LogFollower::StartAtLastLines(size_t count) {
  Fd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return errno == ENOENT ? Status::Ok() : ErrnoStatus("open " + path_, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + path_, errno);
  inode_ = static_cast<uint64_t>(st.st_ino);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (count == 0) {
    offset_ = size;
    return Status::Ok();
  }
  uint64_t pos = size;
  size_t seen = 0;
  std::string block;
  offset_ = 0;
  while (pos > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(kBackBlock, pos));
    pos -= n;
    AIR_RETURN_IF_ERROR(ReadAt(fd.get(), pos, n, &block, path_));
    for (size_t i = block.size(); i-- > 0;) {
      if (block[i] != '\n' || pos + i + 1 == size) continue;  // the final newline ends a line
      if (++seen == count) {
        offset_ = pos + i + 1;
        return Status::Ok();
      }
    }
  }
  return Status::Ok();
}

Result<std::vector<std::string>> LogFollower::ReadNew(bool final) {
  std::vector<std::string> lines;
  more_ = false;
  Fd current(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (current.get() < 0) {
    if (errno == ENOENT) return lines;
    return ErrnoStatus("open " + path_, errno);
  }
  struct stat st {};
  if (::fstat(current.get(), &st) != 0) return ErrnoStatus("stat " + path_, errno);
  int fd = current.get();
  uint64_t size = static_cast<uint64_t>(st.st_size);
  std::optional<Fd> rotated;
  if (inode_ != 0 && static_cast<uint64_t>(st.st_ino) != inode_) {
    // The writer rotated the log (agent/log_format.h): finish the old file, now PATH.1, first.
    rotated.emplace(::open((path_ + ".1").c_str(), O_RDONLY | O_CLOEXEC));
    struct stat old {};
    if (rotated->get() >= 0 && ::fstat(rotated->get(), &old) == 0 &&
        static_cast<uint64_t>(old.st_ino) == inode_ &&
        static_cast<uint64_t>(old.st_size) > offset_) {
      fd = rotated->get();
      size = static_cast<uint64_t>(old.st_size);
    } else {
      inode_ = static_cast<uint64_t>(st.st_ino);
      offset_ = 0;
    }
  }
  if (inode_ == 0) inode_ = static_cast<uint64_t>(st.st_ino);
  std::string data;
  if (size > offset_) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(kReadBlock, size - offset_));
    AIR_RETURN_IF_ERROR(ReadAt(fd, offset_, n, &data, path_));
    offset_ += data.size();
    more_ = offset_ < size || fd != current.get();
  }
  size_t start = 0;
  while (true) {
    size_t newline = data.find('\n', start);
    size_t end = newline == std::string::npos ? data.size() : newline;
    size_t room = partial_.size() < kMaxLogLineBytes ? kMaxLogLineBytes - partial_.size() : 0;
    size_t take = std::min(room, end - start);
    partial_.append(data, start, take);
    partial_dropped_ += end - start - take;
    if (newline == std::string::npos) break;
    if (partial_dropped_ > 0) partial_ += CutNote(partial_dropped_);
    lines.push_back(std::move(partial_));
    partial_.clear();
    partial_dropped_ = 0;
    start = newline + 1;
  }
  if (final && !more_ && (!partial_.empty() || partial_dropped_ > 0)) {
    if (partial_dropped_ > 0) partial_ += CutNote(partial_dropped_);
    lines.push_back(std::move(partial_));
    partial_.clear();
    partial_dropped_ = 0;
  }
  return lines;
}

}  // namespace air::runtime
