// Secret value input: pipes and the hidden terminal prompt.
#include "secrets/value_input.h"

#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "secrets/names.h"

namespace air::secrets {
namespace {

// Restores the terminal settings and the signal mask when the prompt ends, however it ends.
class PromptGuard {
 public:
  PromptGuard(int fd, const termios& saved, const sigset_t& old_mask)
      : fd_(fd), saved_(saved), old_mask_(old_mask) {}
  ~PromptGuard() {
    ::tcsetattr(fd_, TCSAFLUSH, &saved_);
    ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  PromptGuard(const PromptGuard&) = delete;
  PromptGuard& operator=(const PromptGuard&) = delete;

 private:
  int fd_;
  termios saved_;
  sigset_t old_mask_;
};

sigset_t PromptSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP}) sigaddset(&set, sig);
  return set;
}

// True (and the signal consumed) if one of `set` is pending for this thread or process.
bool TakePendingSignal(const sigset_t& set) {
  sigset_t pending;
  sigpending(&pending);
  bool any = false;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP}) {
    if (sigismember(&pending, sig)) any = true;
  }
  if (!any) return false;
  timespec zero{0, 0};
  while (sigtimedwait(&set, nullptr, &zero) > 0) {
  }
  return true;
}

void WriteString(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    s.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

std::string StripOneTrailingNewline(std::string value) {
  if (!value.empty() && value.back() == '\n') {
    value.pop_back();
    if (!value.empty() && value.back() == '\r') value.pop_back();
  }
  return value;
}

Result<std::string> ReadAllLimited(int fd, size_t limit, const std::string& what) {
  std::string out;
  char buf[1 << 14];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      sodium_memzero(out.data(), out.size());
      return ErrnoStatus("read " + what, err);
    }
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    sodium_memzero(buf, sizeof(buf));
    if (out.size() > limit) {
      sodium_memzero(out.data(), out.size());
      // `limit` may allow for a line ending; name the value limit the user must meet.
      return InvalidArgument(fmt::format(
          "{} is longer than {} bytes, the most a secret value can hold; nothing was stored", what,
          std::min(limit, kMaxValueBytes)));
    }
  }
}

Result<std::string> PromptHidden(int tty_fd, int prompt_fd, const std::string& prompt,
                                 size_t limit) {
  termios saved;
  if (::tcgetattr(tty_fd, &saved) != 0) return ErrnoStatus("read terminal settings", errno);
  sigset_t signals = PromptSignals();
  sigset_t old_mask;
  ::pthread_sigmask(SIG_BLOCK, &signals, &old_mask);
  termios quiet = saved;
  quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHOE | ECHOK | ECHONL);
  quiet.c_lflag |= ICANON;
  PromptGuard guard(tty_fd, saved, old_mask);
  if (::tcsetattr(tty_fd, TCSAFLUSH, &quiet) != 0) return ErrnoStatus("turn off echo", errno);
  WriteString(prompt_fd, prompt);

  std::string line;
  char buf[4096];
  while (true) {
    if (TakePendingSignal(signals)) {
      sodium_memzero(line.data(), line.size());
      WriteString(prompt_fd, "\n");
      return Cancelled("canceled at the prompt; nothing was stored");
    }
    pollfd pfd{tty_fd, POLLIN, 0};
    int ready = ::poll(&pfd, 1, 100);
    if (ready < 0 && errno != EINTR) return ErrnoStatus("wait for terminal input", errno);
    if (ready <= 0) continue;
    ssize_t n = ::read(tty_fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoStatus("read terminal", errno);
    }
    if (n == 0) break;  // Ctrl-D
    line.append(buf, static_cast<size_t>(n));
    sodium_memzero(buf, sizeof(buf));
    if (line.size() > limit) {
      sodium_memzero(line.data(), line.size());
      WriteString(prompt_fd, "\n");
      return InvalidArgument(
          fmt::format("the typed value is longer than {} bytes; pipe long "
                      "values in on stdin instead",
                      limit));
    }
    if (line.back() == '\n') break;
  }
  WriteString(prompt_fd, "\n");  // the user's Enter was not echoed
  return StripOneTrailingNewline(std::move(line));
}

Result<std::string> ReadSecretValue(int in_fd, int prompt_fd, const ValueInputOptions& options) {
  if (::isatty(in_fd)) {
    return PromptHidden(in_fd, prompt_fd, options.prompt, kMaxValueBytes + 2);
  }
  // Two extra bytes so that a maximal value followed by "\r\n" is still accepted.
  AIR_ASSIGN_OR_RETURN(std::string value, ReadAllLimited(in_fd, kMaxValueBytes + 2, "stdin"));
  if (options.keep_trailing_newline) return value;
  return StripOneTrailingNewline(std::move(value));
}

}  // namespace air::secrets
