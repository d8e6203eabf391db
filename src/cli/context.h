// CliContext: what every subcommand shares — the output format (-o text|json), the Env, the
// AIR_HOME directory, and the streams to print to — plus the helpers that print results and
// errors in the one JSON envelope: {"v":1,"ts":...,"data":{...}} or {"v":1,"ts":...,"error":
// {"code":...,"message":...}}. Exit codes: 0 success, 1 failure, 2 invalid input or usage.
// Thread safety: used by the main thread only.
#pragma once

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air::cli {

enum class OutputFormat { kText, kJson };

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitInvalid = 2;

struct CliContext {
  OutputFormat format = OutputFormat::kText;
  Env* env = nullptr;
  std::ostream* out = &std::cout;
  std::ostream* err = &std::cerr;
  int exit_code = kExitOk;

  bool json() const { return format == OutputFormat::kJson; }
};

// $AIR_HOME, else $HOME/.air; an existing one must be private to the user
// (base/private_dir.h: the error names its path, owner and mode).
Result<std::string> AirHome(CliContext& ctx);

// Exit code for a status: kInvalidArgument -> 2, other errors -> 1, OK -> 0.
int ExitCodeFor(const Status& status);

// Prints a successful result: the envelope with `data` in JSON mode, `text` otherwise (a
// trailing newline is added when missing; empty text prints nothing). Sets exit_code 0.
void EmitData(CliContext& ctx, const nlohmann::json& data, const std::string& text);

// Prints an error (the envelope on stdout in JSON mode, "error: message" on stderr otherwise),
// with optional extra fields in the error object, and sets exit_code from the status.
void EmitError(CliContext& ctx, const Status& status,
               const nlohmann::json& extra = nlohmann::json::object());

// The envelope object itself, for commands that stream several; print it with JsonLine.
nlohmann::ordered_json Envelope(CliContext& ctx, const nlohmann::json& data);

// `value` as one line of JSON. Strings that are not valid UTF-8 (a file name, an argument or a
// log line with stray bytes) get U+FFFD in place of each bad byte instead of throwing, which
// plain nlohmann dump() does (and an uncaught throw aborts the process).
std::string JsonLine(const nlohmann::ordered_json& value);

}  // namespace air::cli
