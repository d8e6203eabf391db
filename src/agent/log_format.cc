// Node log records: timestamps, line splitting, parsing.
#include "agent/log_format.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>

#include "base/posix_io.h"
#include "base/time_format.h"

namespace air::agent {

std::string FormatLogTimestamp(int64_t micros) { return FormatUtcTimestamp(micros, 6); }

std::optional<LogRecord> ParseLogLine(std::string_view line) {
  // "YYYY-MM-DDTHH:MM:SS.ffffffZ sss text"
  constexpr size_t kTimestampLen = 27;
  if (line.size() < kTimestampLen + 4 || line[kTimestampLen] != ' ' ||
      line[kTimestampLen - 1] != 'Z' || line[4] != '-' || line[10] != 'T') {
    return std::nullopt;
  }
  std::string_view stream = line.substr(kTimestampLen + 1, 3);
  if (stream != "out" && stream != "err" && stream != "air") return std::nullopt;
  LogRecord record;
  record.timestamp = std::string(line.substr(0, kTimestampLen));
  record.stream = std::string(stream);
  size_t text_start = kTimestampLen + 4;
  if (line.size() > text_start) {
    if (line[text_start] != ' ') return std::nullopt;
    record.text = std::string(line.substr(text_start + 1));
  }
  return record;
}

LogLineWriter::LogLineWriter(int fd, Env* env, LogRotation rotation)
    : fd_(fd), env_(env), rotation_(std::move(rotation)) {
  struct stat st {};
  if (rotation_.max_bytes > 0 && ::fstat(fd_, &st) == 0)
    written_ = static_cast<uint64_t>(st.st_size);
}

Status LogLineWriter::Rotate() {
  const std::string& path = rotation_.path;
  if (rotation_.keep <= 0) {
    AIR_RETURN_IF_ERROR(env_->RemoveFile(path).WithContext("rotate node log"));
  } else {
    for (int i = rotation_.keep - 1; i >= 1; --i) {
      std::string from = fmt::format("{}.{}", path, i);
      if (!env_->FileExists(from)) continue;
      AIR_RETURN_IF_ERROR(
          env_->RenameFile(from, fmt::format("{}.{}", path, i + 1)).WithContext("rotate node log"));
    }
    AIR_RETURN_IF_ERROR(env_->RenameFile(path, path + ".1").WithContext("rotate node log"));
  }
  AIR_ASSIGN_OR_RETURN(int fresh, OpenOwnFileForWrite(path, O_CREAT | O_APPEND, 0600, "node log"));
  int moved = ::dup3(fresh, fd_, O_CLOEXEC);
  int err = errno;
  ::close(fresh);
  if (moved < 0) return ErrnoStatus("reopen node log " + path, err);
  written_ = 0;
  return Status::Ok();
}

Status LogLineWriter::Emit(const std::string& stream, std::string_view text) {
  const int64_t now = env_->NowMicros();
  std::string record = FormatLogTimestamp(now);
  record.reserve(record.size() + text.size() + 6);
  record += ' ';
  record += stream;
  record += ' ';
  record.append(text);
  record += '\n';
  if (rotation_.max_bytes > 0 && written_ > 0 && written_ + record.size() > rotation_.max_bytes) {
    AIR_RETURN_IF_ERROR(Rotate());
  }
  written_ += record.size();
  AIR_RETURN_IF_ERROR(WriteFully(fd_, record, "node log"));
  if (observer_ && stream != "air") observer_(stream, text, now);
  return Status::Ok();
}

Status LogLineWriter::Split(Stream& stream, std::string_view filtered) {
  size_t start = 0;
  while (start < filtered.size()) {
    size_t newline = filtered.find('\n', start);
    if (newline == std::string_view::npos) {
      stream.partial.append(filtered.substr(start));
      break;
    }
    std::string_view piece = filtered.substr(start, newline - start);
    if (stream.partial.empty()) {
      AIR_RETURN_IF_ERROR(Emit(stream.name, piece));
    } else {
      stream.partial.append(piece);
      AIR_RETURN_IF_ERROR(Emit(stream.name, stream.partial));
      stream.partial.clear();
    }
    start = newline + 1;
  }
  while (stream.partial.size() >= kMaxLineBytes) {
    AIR_RETURN_IF_ERROR(
        Emit(stream.name, std::string_view(stream.partial).substr(0, kMaxLineBytes)));
    stream.partial.erase(0, kMaxLineBytes);
  }
  // Output that only extends an unfinished line is activity too (hang detection).
  if (start < filtered.size() && !stream.partial.empty()) {
    const int64_t now = env_->MonotonicMicros();
    if (now >= next_touch_us_) {
      next_touch_us_ = now + 1'000'000;
      (void)::futimens(fd_, nullptr);
    }
  }
  return Status::Ok();
}

Status LogLineWriter::Write(Stream& stream, std::string_view chunk) {
  std::string filtered = stream.filter ? stream.filter->Feed(chunk) : std::string(chunk);
  return Split(stream, filtered);
}

Status LogLineWriter::Finish(Stream& stream) {
  if (stream.filter) AIR_RETURN_IF_ERROR(Split(stream, stream.filter->Flush()));
  if (!stream.partial.empty()) {
    AIR_RETURN_IF_ERROR(Emit(stream.name, stream.partial));
    stream.partial.clear();
  }
  return Status::Ok();
}

Status LogLineWriter::Note(std::string_view message) { return Emit("air", message); }

}  // namespace air::agent
