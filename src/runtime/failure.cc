// Human-readable endings and failure summaries.
#include "runtime/failure.h"

#include <fmt/format.h>
#include <signal.h>

#include <cstring>
#include <vector>

#include "agent/log_format.h"
#include "base/strings.h"

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

std::string LastLogLines(Env* env, const std::string& log_path, size_t count) {
  auto text = env->ReadFile(log_path);
  if (!text.ok()) return "";
  std::vector<std::string> lines;
  for (const std::string& line : Split(*text, '\n')) {
    if (line.empty()) continue;
    auto record = agent::ParseLogLine(line);
    if (!record) {
      lines.push_back(line);
    } else if (record->stream != "air") {
      lines.push_back(record->text);
    }
  }
  size_t start = lines.size() > count ? lines.size() - count : 0;
  std::string out;
  for (size_t i = start; i < lines.size(); ++i) out += "  " + lines[i] + "\n";
  if (!out.empty()) out.pop_back();
  return out;
}

std::string NodeFailureSummary(int node_rank, int attempt, const std::string& ending, Env* env,
                               const std::string& log_path) {
  std::string summary = fmt::format("node {} {}", node_rank, ending);
  std::string tail = LastLogLines(env, log_path, 10);
  if (!tail.empty()) {
    summary += fmt::format("\nlast lines of node {} (attempt {}):\n{}", node_rank, attempt, tail);
  }
  return summary;
}

}  // namespace air::runtime
