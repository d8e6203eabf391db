// Reading a secret value for `air secrets put-secret`: from a pipe or file on stdin, or from a
// terminal prompt with echo turned off — never from argv (docs/secrets.md).
//
// Piped input is stored as given except for one trailing line ending ("\n" or "\r\n"), which
// is removed unless keep_trailing_newline is set: `echo "$TOKEN" | air secrets put-secret ...`
// stores the token, not the token plus a newline. At the prompt, the typed line is the value.
// Thread safety: the prompt changes the terminal's settings and the calling thread's signal
// mask for its duration (restored before returning); call it from one thread at a time.
#pragma once

#include <string>

#include "base/status.h"

namespace air::secrets {

struct ValueInputOptions {
  bool keep_trailing_newline = false;
  std::string prompt;  // e.g. "Value for my_scope/hf_token (input hidden): "
};

// Removes one trailing "\n" or "\r\n", if present.
std::string StripOneTrailingNewline(std::string value);

// Reads `fd` to its end, failing with InvalidArgument naming `what` once more than `limit`
// bytes arrive (it stops reading there).
Result<std::string> ReadAllLimited(int fd, size_t limit, const std::string& what);

// Reads one line from the terminal `tty_fd` with echo off after writing the prompt to
// `prompt_fd`. Ctrl-C (or SIGTERM/SIGHUP/SIGQUIT) at the prompt restores the terminal and
// returns Cancelled.
Result<std::string> PromptHidden(int tty_fd, int prompt_fd, const std::string& prompt,
                                 size_t limit);

// The value for put-secret: the prompt when `in_fd` is a terminal, else all of `in_fd`.
// Size and NUL checks are left to ValidateValue.
Result<std::string> ReadSecretValue(int in_fd, int prompt_fd, const ValueInputOptions& options);

}  // namespace air::secrets
