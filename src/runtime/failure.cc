// Human-readable endings and failure summaries.
#include "runtime/failure.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <vector>

#include "agent/log_format.h"
#include "base/strings.h"
#include "base/time_format.h"

namespace air::runtime {
namespace {

const char* SignalHint(int sig) {
  switch (sig) {
    case SIGKILL:
      return "killed — out of memory?";
    case SIGSEGV:
      return "segmentation fault";
    case SIGABRT:
      return "aborted";
    case SIGBUS:
      return "bus error";
    case SIGFPE:
      return "floating-point exception";
    case SIGILL:
      return "illegal instruction";
    case SIGTERM:
      return "terminated";
    case SIGINT:
      return "interrupted";
    default:
      return nullptr;
  }
}

// A failure summary reads at most this much of the end of a node's log (a log may be gigabytes)
// and keeps at most this much of each line (a line may be 64 KiB of progress bars or base64).
constexpr size_t kSummaryTailBytes = 256 * 1024;
constexpr size_t kSummaryLineBytes = 512;

// The last `max_bytes` of the file, starting after a newline when it had to cut ("" when it
// cannot be read).
std::string ReadFileTail(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st;
  std::string out;
  if (::fstat(fd, &st) == 0) {
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t begin = size > max_bytes ? size - max_bytes : 0;
    out.resize(static_cast<size_t>(size - begin));
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n =
          ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(begin + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    out.resize(done);
    if (begin > 0) {
      size_t newline = out.find('\n');
      out.erase(0, newline == std::string::npos ? out.size() : newline + 1);
    }
  }
  ::close(fd);
  return out;
}

// `line` cut to at most `max_bytes` (at a UTF-8 character boundary), saying how much was left
// out.
std::string ShortenLine(const std::string& line, size_t max_bytes) {
  if (line.size() <= max_bytes) return line;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}… ({} more bytes)", line.substr(0, cut), line.size() - cut);
}

}  // namespace

std::string DescribeNodeEnding(const agent::NodeExitReport& report) {
  if (!report.error.empty()) return "could not run: " + report.error;
  if (report.signal) {
    const char* abbrev = sigabbrev_np(*report.signal);
    std::string text = fmt::format("was killed by signal {} (SIG{})", *report.signal,
                                   abbrev != nullptr ? abbrev : "?");
    if (const char* hint = SignalHint(*report.signal)) text += fmt::format(": {}", hint);
    return text;
  }
  if (report.exit_code) {
    // bash reports a child killed by signal N as exit code 128+N.
    if (*report.exit_code > 128 && *report.exit_code < 128 + 65) {
      int sig = *report.exit_code - 128;
      const char* abbrev = sigabbrev_np(sig);
      const char* hint = SignalHint(sig);
      return fmt::format("exited with code {} (a process it ran died of signal {} (SIG{}){})",
                         *report.exit_code, sig, abbrev != nullptr ? abbrev : "?",
                         hint != nullptr ? std::string(": ") + hint : "");
    }
    return fmt::format("exited with code {}", *report.exit_code);
  }
  return "ended without an exit status";
}

namespace {

// The output lines (stdout/stderr records' text) of the end of a node log.
std::vector<std::string> TailOutputLines(const std::string& log_path) {
  std::string text = ReadFileTail(log_path, kSummaryTailBytes);
  std::vector<std::string> lines;
  for (const std::string& line : Split(text, '\n')) {
    if (line.empty()) continue;
    auto record = agent::ParseLogLine(line);
    if (!record) {
      lines.push_back(line);
    } else if (record->stream != "air") {
      lines.push_back(record->text);
    }
  }
  return lines;
}

// "[rank1]: text" / "[default0]:text" (launcher line prefixes) -> "text".
std::string_view WithoutRankPrefix(std::string_view line) {
  if (line.size() > 3 && line[0] == '[') {
    size_t close = line.find("]:");
    if (close != std::string_view::npos && close < 24) {
      line.remove_prefix(close + 2);
      if (!line.empty() && line[0] == ' ') line.remove_prefix(1);
    }
  }
  return line;
}

// A Python exception line: "ModuleNotFoundError: No module named 'x'", "a.b.CustomError",
// "KeyboardInterrupt": a dotted identifier, then ":" or the end of the line.
bool IsExceptionLine(std::string_view line) {
  if (line.empty() || !(std::isalpha(static_cast<unsigned char>(line[0])) || line[0] == '_')) {
    return false;
  }
  size_t i = 0;
  while (i < line.size() &&
         (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' || line[i] == '.')) {
    ++i;
  }
  std::string_view name = line.substr(0, i);
  if (i < line.size() && line[i] != ':') return false;
  std::string_view last =
      name.substr(name.rfind('.') == std::string_view::npos ? 0 : name.rfind('.') + 1);
  for (std::string_view suffix : {"Error", "Exception", "Exit", "Interrupt", "Warning"}) {
    if (last.size() >= suffix.size() && last.ends_with(suffix)) return true;
  }
  return false;
}

}  // namespace

std::optional<RootCause> FindRootCause(const std::vector<std::string>& lines) {
  RootCause cause;
  bool in_traceback = false;
  bool in_block = false;
  for (const std::string& raw : lines) {
    std::string_view line = WithoutRankPrefix(raw);
    if (line == "Traceback (most recent call last):") {
      in_traceback = true;
      continue;
    }
    if (StartsWith(line, "Root Cause (first observed failure):")) {
      in_block = true;
      continue;
    }
    if (in_block) {
      std::string_view t = Trim(line);
      if (StartsWith(t, "====")) in_block = false;
      if (StartsWith(t, "rank") && t.find(':') != std::string_view::npos) {
        cause.rank = std::string(Trim(t.substr(t.find(':') + 1)));
      }
      if (StartsWith(t, "exitcode") && t.find(':') != std::string_view::npos) {
        cause.exit = std::string(Trim(t.substr(t.find(':') + 1)));
      }
      continue;
    }
    // torchrun's own exception says only that a child failed: not the cause.
    if (in_traceback && cause.exception.empty() && IsExceptionLine(line) &&
        line.find("ChildFailedError") == std::string_view::npos) {
      cause.exception = std::string(line);
    }
  }
  if (cause.exception.empty()) return std::nullopt;
  return cause;
}

namespace {

std::string DescribeRootCause(const RootCause& cause) {
  std::string where;
  if (!cause.rank.empty()) where = " of rank " + cause.rank;
  if (!cause.exit.empty()) where += " (exitcode " + cause.exit + ")";
  return fmt::format("root cause{}: {}", where, ShortenLine(cause.exception, kSummaryLineBytes));
}

}  // namespace

std::string LastLogLines(const std::string& log_path, size_t count) {
  std::vector<std::string> lines = TailOutputLines(log_path);
  size_t start = lines.size() > count ? lines.size() - count : 0;
  std::string out;
  for (size_t i = start; i < lines.size(); ++i) {
    out += "  " + ShortenLine(lines[i], kSummaryLineBytes) + "\n";
  }
  if (!out.empty()) out.pop_back();
  return out;
}

std::string NodeFailureSummary(int node_rank, int attempt, const std::string& ending,
                               const std::string& log_path) {
  std::string summary = fmt::format("node {} {}", node_rank, ending);
  if (auto cause = FindRootCause(TailOutputLines(log_path))) {
    summary += "\n" + DescribeRootCause(*cause);
  }
  std::string tail = LastLogLines(log_path, 10);
  if (!tail.empty()) {
    summary += fmt::format("\nlast lines of node {} (attempt {}):\n{}", node_rank, attempt, tail);
  }
  return summary;
}

std::string SummaryWithFirstAlert(const std::string& summary, const std::optional<Alert>& first) {
  if (!first) return summary;
  return fmt::format("first alert: {} at {}\n  {}\n{}", AlertHeadline(*first),
                     FormatUtcTimestamp(first->record.time_us, 3),
                     ShortenLine(first->record.line, kSummaryLineBytes), summary);
}

}  // namespace air::runtime
