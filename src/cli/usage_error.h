// Usage errors of the air command line: what to tell a user whose arguments CLI11 rejected.
//
// CLI11 reports the first check that fails, which is often not the real mistake: `air run
// --bogus` fails on "--file is required" before the unknown option is looked at, and an
// unknown word after `air secrets` reads "A subcommand is required". DescribeUsageError walks
// the arguments itself, so an unknown option or command is named (with a did-you-mean and the
// valid choices) and the help to read is that of the command the user was typing, e.g.
// `air run --help`.
// Thread safety: pure functions over the parsed CLI11 tree.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace air::cli {

struct UsageError {
  std::string message;       // one line, without "error: "
  std::string help_command;  // "air run --help", or "air --help" at the top level
};

UsageError DescribeUsageError(CLI::App& root, int argc, char** argv, const CLI::ParseError& e);

}  // namespace air::cli
